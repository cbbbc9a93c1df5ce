#include "comm/nccl/nccl_communicator.hpp"

#include <ATen/ops/empty.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi_ranks.hpp"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

void nccl_check(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
  if (rc == ncclSuccess) return;
  std::string detail = ncclGetLastError(comm);
  throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(rc) + (detail.empty() ? "" : " (" + detail + ")"));
}

ncclDataType_t sum_type(const char* op, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      throw std::invalid_argument(std::string(op) + ": NCCL cannot sum " + c10::toString(t.scalar_type()));
  }
}

// One launch on the communicator's stream: a collective, or a group of sends and receives.
// `done` is recorded after it.
struct Launch {
  cudaEvent_t done = nullptr;
  ~Launch() {
    if (done) cudaEventDestroy(done);
  }
};

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `mpi`, which this object frees if `owned` (a split's communicator).
  NcclCommunicator(MPI_Comm mpi, bool owned, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send(const at::Tensor& tensor, int peer, int tag) override { isend(tensor, peer, tag)->wait(); }
  void recv(at::Tensor& tensor, int peer, int tag) override { irecv(tensor, peer, tag)->wait(); }
  void all_reduce_sum(at::Tensor& tensor) override { iall_reduce_sum(tensor)->wait(); }
  at::Tensor all_gather(const at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::unique_ptr<Work> isend(const at::Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Work> irecv(at::Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Work> iall_reduce_sum(at::Tensor& tensor) override;
  std::unique_ptr<Work> batch_isend_irecv(std::vector<PointToPoint> ops) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  // Blocks until `launch` has finished; past the deadline or on an NCCL/CUDA error, ends the
  // job with one line about `what`.
  void wait_for(Launch& launch, const std::string& what);

 private:
  void release();
  void check_buffer(const char* op, const at::Tensor& t) const;
  void check_peer(const char* op, int peer) const;
  std::string describe(const char* op, int peer) const;
  // Launches a collective or a group; `what` names it if its enqueue stalls.
  template <class Enqueue>
  std::shared_ptr<Launch> launch(Enqueue enqueue, const std::string& what);
  std::shared_ptr<Launch> record();
  // The communicator is non-blocking, so that connecting to a peer that never comes cannot
  // hang this thread inside NCCL: an enqueue may answer ncclInProgress, and this polls until
  // NCCL has settled, against the deadline counted from `start`.
  void settle(ncclResult_t enqueued, const std::string& what, Clock::time_point start);
  // One poll's verdict on the deadline and NCCL's error state; ends the job when either failed.
  void check_alive(const std::string& what, Clock::time_point start);
  [[noreturn]] void abort_job(const std::string& line);

  MPI_Comm mpi_;  // for setup and split only; data moves through NCCL
  bool owned_;
  int device_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;  // MPI_COMM_WORLD ranks, for messages
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int* barrier_word_ = nullptr;
};

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* owner, std::shared_ptr<Launch> launch, std::string what,
           std::vector<at::Tensor> keep_alive)
      : owner_(owner), launch_(std::move(launch)), what_(std::move(what)), keep_alive_(std::move(keep_alive)) {}
  ~NcclWork() override { wait(); }

  void wait() override {
    if (!launch_) return;
    owner_->wait_for(*launch_, what_);
    launch_.reset();
    keep_alive_.clear();
  }

 private:
  NcclCommunicator* owner_;
  std::shared_ptr<Launch> launch_;
  std::string what_;
  std::vector<at::Tensor> keep_alive_;
};

NcclCommunicator::NcclCommunicator(MPI_Comm mpi, bool owned, int device) : mpi_(mpi), owned_(owned), device_(device) {
  MPI_Comm_rank(mpi_, &rank_);
  MPI_Comm_size(mpi_, &size_);
  world_ranks_ = world_ranks_of(mpi_);
  try {
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    // Rank 0 broadcasts even when creating the id failed, with a flag, so that the other
    // ranks fail with it instead of waiting in MPI_Bcast forever.
    struct {
      ncclUniqueId id;
      int ok;
    } shared{};
    std::string rank0_error;
    if (rank_ == 0) {
      ncclResult_t rc = ncclGetUniqueId(&shared.id);
      shared.ok = rc == ncclSuccess;
      if (!shared.ok) rank0_error = ncclGetErrorString(rc);
    }
    MPI_Bcast(&shared, sizeof shared, MPI_BYTE, 0, mpi_);
    if (!shared.ok) throw std::runtime_error("ncclGetUniqueId on rank 0 failed" + (rank0_error.empty() ? "" : ": " + rank0_error));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // see settle()
    ncclResult_t rc = ncclCommInitRankConfig(&nccl_, size_, shared.id, rank_, &config);
    // The ranks are all alive here (they just answered MPI_Bcast), so this wait is bounded.
    while (rc == ncclInProgress) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ncclCommGetAsyncError(nccl_, &rc);
    }
    nccl_check(rc, "ncclCommInitRankConfig", nccl_);
    cuda_check(cudaStreamCreate(&stream_), "cudaStreamCreate");  // blocking: see the header
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(int)), "cudaMalloc");
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  if (nccl_) {
    // Finalize flushes what was issued; bounded by the timeout so a dead peer cannot hold
    // the exit, after which destroy would wait too: abort instead.
    ncclResult_t rc = ncclCommFinalize(nccl_);
    const auto start = Clock::now();
    while (rc == ncclInProgress &&
           (timeout_seconds() <= 0 || std::chrono::duration<double>(Clock::now() - start).count() < timeout_seconds())) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ncclCommGetAsyncError(nccl_, &rc);
    }
    if (rc == ncclSuccess) ncclCommDestroy(nccl_);
    else ncclCommAbort(nccl_);
  }
  if (barrier_word_) cudaFree(barrier_word_);
  if (stream_) cudaStreamDestroy(stream_);
  nccl_ = nullptr, barrier_word_ = nullptr, stream_ = nullptr;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owned_ && !finalised) MPI_Comm_free(&mpi_);
  owned_ = false;
}

void NcclCommunicator::check_buffer(const char* op, const at::Tensor& t) const {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor");
  if (!t.is_cuda() || t.device().index() != device_ || !t.is_contiguous())
    throw std::invalid_argument(std::string(op) + ": the NCCL backend needs a contiguous tensor on cuda:" +
                                std::to_string(device_) + " (got " + c10::toString(t.scalar_type()) + " on " +
                                t.device().str() + (t.is_contiguous() ? "" : ", not contiguous") + ")");
}

void NcclCommunicator::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw std::invalid_argument(std::string(op) + ": peer " + std::to_string(peer) + " is not another rank of " +
                                std::to_string(size_));
}

// "rank R: OP with peer P" (or "with peers A,B" for a collective), in MPI_COMM_WORLD ranks.
std::string NcclCommunicator::describe(const char* op, int peer) const {
  if (peer < 0 && size_ == 2) peer = 1 - rank_;
  std::string what = "rank " + std::to_string(world_ranks_[rank_]) + ": " + op + " with ";
  if (peer >= 0) return what + "peer " + std::to_string(world_ranks_[peer]);
  what += "peers ";
  for (int i = 0, named = 0; i < size_; ++i)
    if (i != rank_) what += (named++ ? "," : "") + std::to_string(world_ranks_[i]);
  return what;
}

std::unique_ptr<Work> NcclCommunicator::isend(const at::Tensor& tensor, int peer, int tag) {
  return batch_isend_irecv({{true, tensor, peer, tag}});
}
std::unique_ptr<Work> NcclCommunicator::irecv(at::Tensor& tensor, int peer, int tag) {
  return batch_isend_irecv({{false, tensor, peer, tag}});
}

// Tags are not NCCL's: the ops go out in the order given, which is the order the peer's
// matching ops must have been given in (Communicator::send).
std::unique_ptr<Work> NcclCommunicator::batch_isend_irecv(std::vector<PointToPoint> ops) {
  std::vector<at::Tensor> keep_alive;
  std::string op_names;
  int peer = ops.empty() ? -1 : ops.front().peer;
  for (const PointToPoint& op : ops) {
    const char* name = op.send ? "send" : "recv";
    check_buffer(name, op.tensor);
    check_peer(name, op.peer);
    keep_alive.push_back(op.tensor);
    if (op_names.find(name) == std::string::npos) op_names += std::string(op_names.empty() ? "" : "+") + name;
    if (op.peer != peer) peer = -1;
  }
  if (ops.empty()) return std::make_unique<NcclWork>(this, nullptr, "", std::move(keep_alive));
  const std::string what = describe(op_names.c_str(), peer);
  auto done = launch([&] {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t first_error = ncclSuccess;
    for (const PointToPoint& op : ops) {
      void* data = op.tensor.data_ptr();
      ncclResult_t rc = op.send ? ncclSend(data, op.tensor.nbytes(), ncclChar, op.peer, nccl_, stream_)
                                : ncclRecv(data, op.tensor.nbytes(), ncclChar, op.peer, nccl_, stream_);
      if (first_error == ncclSuccess) first_error = rc;
    }
    ncclResult_t end = ncclGroupEnd();  // always closed, even after a failed enqueue
    return first_error != ncclSuccess && first_error != ncclInProgress ? first_error : end;
  }, what);
  return std::make_unique<NcclWork>(this, done, what, std::move(keep_alive));
}

std::shared_ptr<Launch> NcclCommunicator::record() {
  auto launch = std::make_shared<Launch>();
  cuda_check(cudaEventCreateWithFlags(&launch->done, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventRecord(launch->done, stream_), "cudaEventRecord");
  return launch;
}

template <class Enqueue>
std::shared_ptr<Launch> NcclCommunicator::launch(Enqueue enqueue, const std::string& what) {
  const auto start = Clock::now();
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  settle(enqueue(), what, start);
  return record();
}

void NcclCommunicator::settle(ncclResult_t enqueued, const std::string& what, Clock::time_point start) {
  ncclResult_t state = enqueued;
  while (state == ncclInProgress) {
    check_alive(what, start);  // ends the job on an NCCL error or past the deadline
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    ncclCommGetAsyncError(nccl_, &state);
  }
  nccl_check(state, what.c_str(), nccl_);
}

void NcclCommunicator::check_alive(const std::string& what, Clock::time_point start) {
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(nccl_, &async);
  if (async != ncclSuccess && async != ncclInProgress)
    abort_job(what + " failed: " + ncclGetErrorString(async) + " (" + ncclGetLastError(nccl_) + ")");
  const double timeout = timeout_seconds();
  if (timeout > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= timeout) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout);
    abort_job(what + " timed out after " + seconds + " s (" +
              (what.find("peers") == std::string::npos ? "the peer" : "at least one of them") + " never answered)");
  }
}

void NcclCommunicator::wait_for(Launch& launch, const std::string& what) {
  const auto start = Clock::now();
  auto nap = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    const cudaError_t state = cudaEventQuery(launch.done);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) abort_job(what + " failed: " + cudaGetErrorString(state));
    check_alive(what, start);
    // Spin briefly for small messages, then nap (up to 200 us) so a waiting rank does not
    // take a core from the process it waits for.
    if (polls > 1000) {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(200));
    }
  }
}

// ncclCommAbort first: it stops this rank's kernels, which would otherwise keep the GPU
// (and MPI_Abort's exit) waiting on a peer that is never coming.
void NcclCommunicator::abort_job(const std::string& line) {
  std::fprintf(stderr, "graphtune: error: %s\n", line.c_str());
  std::fflush(stderr);
  if (nccl_) ncclCommAbort(nccl_);
  nccl_ = nullptr;
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

std::unique_ptr<Work> NcclCommunicator::iall_reduce_sum(at::Tensor& tensor) {
  check_buffer("iall_reduce_sum", tensor);
  const ncclDataType_t type = sum_type("iall_reduce_sum", tensor);
  void* data = tensor.data_ptr();
  const std::string what = describe("all_reduce_sum", -1);
  auto done = launch([&] { return ncclAllReduce(data, data, tensor.numel(), type, ncclSum, nccl_, stream_); }, what);
  return std::make_unique<NcclWork>(this, done, what, std::vector<at::Tensor>{tensor});
}

at::Tensor NcclCommunicator::all_gather(const at::Tensor& tensor) {
  check_buffer("all_gather", tensor);
  std::vector<int64_t> sizes = tensor.sizes().vec();
  if (sizes.empty()) sizes.push_back(size_);
  else sizes[0] *= size_;
  at::Tensor out = at::empty(sizes, tensor.options());
  const std::string what = describe("all_gather", -1);
  auto done = launch([&] {
    return ncclAllGather(tensor.data_ptr(), out.data_ptr(), tensor.nbytes(), ncclChar, nccl_, stream_);
  }, what);
  NcclWork(this, done, what, {tensor, out}).wait();
  return out;
}

void NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_buffer("broadcast", tensor);
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(size_));
  void* data = tensor.data_ptr();
  // A receiving rank waits on the root in the first place; the root waits on everyone.
  const std::string what = describe("broadcast", rank_ == root ? -1 : root);
  auto done = launch([&] { return ncclBroadcast(data, data, tensor.nbytes(), ncclChar, root, nccl_, stream_); }, what);
  NcclWork(this, done, what, {tensor}).wait();
}

void NcclCommunicator::barrier() {
  const std::string what = describe("barrier", -1);
  auto done = launch([&] { return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, nccl_, stream_); }, what);
  NcclWork(this, done, what, {}).wait();
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (color < 0) throw std::invalid_argument("split: colour must be >= 0, got " + std::to_string(color));
  // MPI_Comm_split and the new NCCL id's MPI_Bcast have no timeout; once every rank has
  // passed this barrier all of them are alive and about to call them.
  barrier();
  MPI_Comm sub;
  MPI_Comm_split(mpi_, color, key, &sub);
  auto result = std::make_unique<NcclCommunicator>(sub, true, device_);
  result->set_timeout_seconds(timeout_seconds());
  return result;
}

// This process's GPU: its rank among the ranks on this host, modulo the devices it sees.
int local_rank(MPI_Comm comm) {
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(env);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

// Why this rank cannot use a GPU, or "" when it can.
std::string device_problem(int* count) {
  const cudaError_t rc = cudaGetDeviceCount(count);
  if (rc != cudaSuccess) return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(rc) + ")";
  if (*count == 0) return "no CUDA device";
  return "";
}

void put(char* error, size_t size, const std::string& text) {
  if (size == 0) return;
  std::snprintf(error, size, "%s", text.c_str());
}

}  // namespace
}  // namespace gt

extern "C" __attribute__((visibility("default"))) gt::Communicator* graphtune_nccl_world(
    const void* mpi_comm, double timeout_seconds, char* error, std::size_t error_size) {
  try {
    int count = 0;
    std::string problem = gt::device_problem(&count);
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    if (!mpi_up) {
      gt::put(error, error_size, problem.empty() ? "MPI is not initialised (start the job under mpirun)" : problem);
      return nullptr;
    }
    const MPI_Comm comm = *static_cast<const MPI_Comm*>(mpi_comm);
    // Every rank learns whether any rank lacks a GPU, so all of them fail together instead of
    // the others waiting for it in the NCCL setup.
    int bad = !problem.empty(), any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
    if (any_bad) {
      gt::put(error, error_size, problem.empty() ? "another rank has no usable CUDA device" : problem);
      return nullptr;
    }
    auto* result = new gt::NcclCommunicator(comm, false, gt::local_rank(comm) % count);
    result->set_timeout_seconds(timeout_seconds);
    return result;
  } catch (const std::exception& e) {
    gt::put(error, error_size, e.what());
    return nullptr;
  }
}
