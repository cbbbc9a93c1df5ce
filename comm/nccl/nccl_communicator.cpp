#include "comm/nccl/nccl_communicator.hpp"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <unistd.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
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
// `done` is recorded after it; the watchdog follows it from `start` until `done` completes.
struct Launch {
  cudaEvent_t done = nullptr;
  std::string what;
  Clock::time_point start;
  ~Launch() {
    if (done) cudaEventDestroy(done);
  }
};

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `mpi`, which this object frees if `owned` (a split's communicator). With
  // `parent`, split from it (ncclCommSplit, collective over the parent's ranks with the colour
  // and key `mpi` was split by); without, a communicator of its own whose id rank 0 sends
  // over MPI. Either runs under the deadline of `timeout` seconds.
  NcclCommunicator(MPI_Comm mpi, bool owned, int device, double timeout, ncclComm_t parent = nullptr,
                   int color = 0, int key = 0);
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

  // The caller's current stream waits for `launch` on the device; the host does not.
  void order_after(const Launch& launch);
  // Blocks the host until `launch` has finished; past the deadline or on an NCCL/CUDA error,
  // ends the job with one line about it.
  void wait_for(const Launch& launch);

 private:
  void release();
  void check_buffer(const char* op, const at::Tensor& t) const;
  void check_peer(const char* op, int peer) const;
  std::string describe(const char* op, int peer) const;
  // Launches a collective or a group on the communicator's stream, after what the caller's
  // stream has queued so far; `what` names it in any failure.
  template <class Enqueue>
  std::shared_ptr<Launch> launch(Enqueue enqueue, const std::string& what, const std::vector<at::Tensor>& tensors);
  // The communicator is non-blocking, so that connecting to a peer that never comes cannot
  // hang this thread inside NCCL: init, split and an enqueue may answer ncclInProgress, and
  // this polls until NCCL has settled, against the deadline counted from `start`.
  // `comm`: the communicator whose state answers (default this one's).
  void settle(ncclResult_t enqueued, const std::string& what, Clock::time_point start, ncclComm_t comm = nullptr);
  // One poll's verdict on the deadline and NCCL's error state; ends the job when either failed.
  void check_alive(const std::string& what, Clock::time_point start, ncclComm_t comm = nullptr);
  // The watchdog thread: follows every launch in flight, whether or not a host thread waits
  // for it (Work::wait leaves the host free), and ends the job within one poll (50 ms) of a
  // launch passing the deadline or of NCCL reporting an error (a peer that died).
  void watch();
  [[noreturn]] void abort_job(const std::string& line);

  MPI_Comm mpi_;  // for setup and split only; data moves through NCCL
  bool owned_;
  int device_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;  // MPI_COMM_WORLD ranks, for messages
  std::string host_;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;  // where the caller's stream was at a launch
  int* barrier_word_ = nullptr;

  // Launches come from the thread that calls backward and from autograd's device
  // thread (gradient hooks, the tensor-parallel linears' backward), never at once: backward
  // blocks its caller. This lock makes that so for the communicator's own state whatever a
  // caller does; the order of collectives across ranks stays the callers' to keep.
  std::mutex launch_mutex_;
  std::mutex mutex_;  // guards in_flight_ and stopping_, shared with the watchdog
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Launch>> in_flight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

// What a Work's wait() means on CUDA tensors, as torch.distributed's NCCL work: the caller's
// current stream, and so every kernel queued on it later, waits for the operation on the
// device; the host goes on. A tensor received or reduced is then ready for the next kernel
// and for a copy to the host. The deadline is the watchdog's, counted from the launch.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* owner, std::shared_ptr<Launch> launch, std::vector<at::Tensor> keep_alive)
      : owner_(owner), launch_(std::move(launch)), keep_alive_(std::move(keep_alive)) {}
  ~NcclWork() override { wait(); }

  void wait() override {
    if (!launch_) return;
    owner_->order_after(*launch_);
    launch_.reset();
    keep_alive_.clear();
  }

 private:
  NcclCommunicator* owner_;
  std::shared_ptr<Launch> launch_;
  std::vector<at::Tensor> keep_alive_;
};

NcclCommunicator::NcclCommunicator(MPI_Comm mpi, bool owned, int device, double timeout, ncclComm_t parent, int color,
                                   int key)
    : mpi_(mpi), owned_(owned), device_(device), host_(host_name()) {
  set_timeout_seconds(timeout);
  MPI_Comm_rank(mpi_, &rank_);
  MPI_Comm_size(mpi_, &size_);
  world_ranks_ = world_ranks_of(mpi_);
  try {
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // see settle()
    const auto start = Clock::now();
    if (parent) {
      // Non-blocking, the split runs as the parent's pending operation (the parent refuses any
      // other until it has settled), and NCCL writes the new handle only when that has ended,
      // whatever the call returned (measured on NCCL 2.28: ncclSuccess, the handle still null).
      // So the parent and the handle are awaited, then the new communicator's own setup.
      const std::string what = describe("ncclCommSplit", -1);
      ncclResult_t state = ncclCommSplit(parent, color, key, &nccl_, &config);
      if (state != ncclInProgress) nccl_check(state, what.c_str(), parent);
      state = ncclInProgress;
      while (state == ncclInProgress || !__atomic_load_n(&nccl_, __ATOMIC_ACQUIRE)) {
        check_alive(what, start, parent);  // ends the job on an NCCL error or past the deadline
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        ncclCommGetAsyncError(parent, &state);
      }
      nccl_check(state, what.c_str(), parent);
      settle(ncclInProgress, what, start);
    } else {
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
      if (!shared.ok)
        throw std::runtime_error("ncclGetUniqueId on rank 0 failed" + (rank0_error.empty() ? "" : ": " + rank0_error));
      settle(ncclCommInitRankConfig(&nccl_, size_, shared.id, rank_, &config), describe("ncclCommInitRank", -1), start);
    }
    // Not blocking: ordered against the caller's stream by events (launch, order_after) only,
    // so the caller's kernels run while NCCL's do.
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(int)), "cudaMalloc");
    watchdog_ = std::thread([this] { watch(); });
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  // Nothing is left in flight: each launch finishes, or the job ends past its deadline.
  std::vector<std::shared_ptr<Launch>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left = in_flight_;
  }
  for (const auto& l : left) wait_for(*l);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    in_flight_.clear();
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
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
  if (caller_ready_) cudaEventDestroy(caller_ready_);
  if (stream_) cudaStreamDestroy(stream_);
  nccl_ = nullptr, barrier_word_ = nullptr, caller_ready_ = nullptr, stream_ = nullptr;
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

// "rank R (HOST, cuda:D): OP with peer P" (or "with peers A,B" for a collective), in
// MPI_COMM_WORLD ranks.
std::string NcclCommunicator::describe(const char* op, int peer) const {
  if (peer < 0 && size_ == 2) peer = 1 - rank_;
  std::string what = "rank " + std::to_string(world_ranks_[rank_]) + " (" + host_ + ", cuda:" +
                     std::to_string(device_) + "): " + op + " with ";
  if (size_ == 1) return what + "no peer";
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
  if (ops.empty()) return std::make_unique<NcclWork>(this, nullptr, std::move(keep_alive));
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
  }, what, keep_alive);
  return std::make_unique<NcclWork>(this, done, std::move(keep_alive));
}

template <class Enqueue>
std::shared_ptr<Launch> NcclCommunicator::launch(Enqueue enqueue, const std::string& what,
                                                 const std::vector<at::Tensor>& tensors) {
  std::lock_guard<std::mutex> serial(launch_mutex_);
  auto l = std::make_shared<Launch>();
  l->what = what;
  l->start = Clock::now();
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  // The tensors are complete once what the caller's stream has queued so far has run.
  const auto index = static_cast<c10::DeviceIndex>(device_);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(index);
  cuda_check(cudaEventRecord(caller_ready_, caller.stream()), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(stream_, caller_ready_, 0), "cudaStreamWaitEvent");
  // The caching allocator must not hand their memory to the caller's stream again before
  // NCCL is done with it, even if the caller drops them before waiting.
  const c10::cuda::CUDAStream comm = c10::cuda::getStreamFromExternal(stream_, index);
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), comm);
  settle(enqueue(), what, l->start);
  cuda_check(cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventRecord(l->done, stream_), "cudaEventRecord");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back(l);
  }
  return l;
}

void NcclCommunicator::settle(ncclResult_t enqueued, const std::string& what, Clock::time_point start,
                              ncclComm_t comm) {
  if (!comm) comm = nccl_;
  ncclResult_t state = enqueued;
  while (state == ncclInProgress) {
    check_alive(what, start, comm);  // ends the job on an NCCL error or past the deadline
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    ncclCommGetAsyncError(comm, &state);
  }
  nccl_check(state, what.c_str(), comm);
}

void NcclCommunicator::check_alive(const std::string& what, Clock::time_point start, ncclComm_t comm) {
  if (!comm) comm = nccl_;
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess && async != ncclInProgress)
    abort_job(what + " failed: " + ncclGetErrorString(async) + " (" + ncclGetLastError(comm) + ")");
  const double timeout = timeout_seconds();
  if (timeout > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= timeout) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout);
    abort_job(what + " timed out after " + seconds + " s (" +
              (what.find("peers") == std::string::npos ? "the peer" : "at least one of them") + " never answered)");
  }
}

void NcclCommunicator::order_after(const Launch& launch) {
  const cudaError_t state = cudaEventQuery(launch.done);
  if (state == cudaSuccess) return;
  if (state != cudaErrorNotReady) abort_job(launch.what + " failed: " + cudaGetErrorString(state));
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_));
  cuda_check(cudaStreamWaitEvent(caller.stream(), launch.done, 0), "cudaStreamWaitEvent");
}

void NcclCommunicator::wait_for(const Launch& launch) {
  auto nap = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    const cudaError_t state = cudaEventQuery(launch.done);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) abort_job(launch.what + " failed: " + cudaGetErrorString(state));
    check_alive(launch.what, launch.start);
    // Spin briefly for small messages, then nap (up to 200 us) so a waiting rank does not
    // take a core from the process it waits for.
    if (polls > 1000) {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(200));
    }
  }
}

void NcclCommunicator::watch() {
  // CUDA's runtime calls below act on this thread's current device.
  if (cudaSetDevice(device_) != cudaSuccess) return;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping_) break;
    std::vector<std::shared_ptr<Launch>> still;
    for (const auto& l : in_flight_) {
      const cudaError_t state = cudaEventQuery(l->done);
      if (state == cudaSuccess) continue;
      if (state != cudaErrorNotReady) abort_job(l->what + " failed: " + cudaGetErrorString(state));
      check_alive(l->what, l->start);  // ends the job past the deadline or on NCCL's error
      still.push_back(l);
    }
    in_flight_.swap(still);
  }
}

// ncclCommAbort first: it stops this rank's kernels, which would otherwise keep the GPU
// (and MPI_Abort's exit) waiting on a peer that is never coming. The watchdog calls this from
// its own thread, where MPI_Abort is the one MPI call made: the job is ending either way.
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
  auto done = launch([&] { return ncclAllReduce(data, data, tensor.numel(), type, ncclSum, nccl_, stream_); }, what,
                     {tensor});
  return std::make_unique<NcclWork>(this, done, std::vector<at::Tensor>{tensor});
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
  }, what, {tensor, out});
  NcclWork(this, done, {tensor, out}).wait();
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
  auto done = launch([&] { return ncclBroadcast(data, data, tensor.nbytes(), ncclChar, root, nccl_, stream_); }, what,
                     {tensor});
  NcclWork(this, done, {tensor}).wait();
}

// The one operation the host itself waits for: every rank has reached it when it returns.
void NcclCommunicator::barrier() {
  const std::string what = describe("barrier", -1);
  auto done = launch([&] { return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, nccl_, stream_); }, what,
                     {});
  wait_for(*done);
}

// ncclCommSplit shares the parent's connections and setup instead of a new id and init. The
// MPI communicator is split alongside for the new one's world ranks and later splits.
std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (color < 0) throw std::invalid_argument("split: colour must be >= 0, got " + std::to_string(color));
  // MPI_Comm_split has no timeout; once every rank has passed this barrier all of them are
  // alive and about to call it. The NCCL split runs under the deadline.
  barrier();
  MPI_Comm sub;
  MPI_Comm_split(mpi_, color, key, &sub);
  return std::make_unique<NcclCommunicator>(sub, true, device_, timeout_seconds(), nccl_, color, key);
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
    return new gt::NcclCommunicator(comm, false, gt::local_rank(comm) % count, timeout_seconds);
  } catch (const std::exception& e) {
    gt::put(error, error_size, e.what());
    return nullptr;
  }
}
