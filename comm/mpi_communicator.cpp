#include "comm/mpi_communicator.hpp"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "comm/mpi_ranks.hpp"

namespace gt {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe(const at::Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + " on " + t.device().str() +
         (t.is_contiguous() ? "" : ", not contiguous");
}

// MPI reads and writes the tensor's memory directly: it must be one block of host memory,
// and its byte count must fit MPI's int counts.
void check_buffer(const char* op, const at::Tensor& t) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor");
  if (!t.device().is_cpu() || !t.is_contiguous())
    throw std::invalid_argument(std::string(op) + ": the MPI backend needs a contiguous CPU tensor (got " +
                                describe(t) + ")");
  if (t.nbytes() > static_cast<size_t>(INT_MAX))
    throw std::invalid_argument(std::string(op) + ": tensor of " + std::to_string(t.nbytes()) +
                                " bytes is over MPI's 2 GiB count limit; send it in pieces");
}

MPI_Datatype sum_type(const char* op, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    default:
      throw std::invalid_argument(std::string(op) + ": MPI cannot sum " + c10::toString(t.scalar_type()) +
                                  " (float32, float64, int64 only; convert bf16/fp16 to float32)");
  }
}

int bytes(const at::Tensor& t) { return static_cast<int>(t.nbytes()); }

// Polls instead of MPI_Wait so that a missing peer ends in a message rather than a hang.
// A short spin keeps small messages fast; after that the rank naps (growing to 200 us) so a
// waiting rank does not take a core from the peer it waits for (ranks often share cores).
class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request request, double timeout, std::string what, std::vector<at::Tensor> keep_alive)
      : request_(request), timeout_(timeout), what_(std::move(what)), keep_alive_(std::move(keep_alive)) {}
  ~MpiWork() override { wait(); }

  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    const auto start = Clock::now();
    auto nap = std::chrono::microseconds(1);
    for (int polls = 0;; ++polls) {
      int done = 0;
      MPI_Test(&request_, &done, MPI_STATUS_IGNORE);  // also drives MPI's progress engine
      if (done) break;
      if (timeout_ > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= timeout_) abort_job();
      if (polls > 1000) {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(200));
      }
    }
    request_ = MPI_REQUEST_NULL;
    keep_alive_.clear();
  }

 private:
  [[noreturn]] void abort_job() {
    std::fprintf(stderr, "graphtune: error: %s timed out after %g s (%s never answered)\n", what_.c_str(),
                 timeout_, what_.find("peers") == std::string::npos ? "the peer" : "at least one of them");
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

  MPI_Request request_;
  double timeout_;
  std::string what_;  // "rank R: OP with peer P", ready for the message
  std::vector<at::Tensor> keep_alive_;
};

}  // namespace

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) throw std::runtime_error("MpiCommunicator: MPI is not initialised (start the job under mpirun)");
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(MPI_COMM_WORLD, false));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  world_ranks_ = world_ranks_of(comm_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owned_ && !finalised) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw std::invalid_argument(std::string(op) + ": peer " + std::to_string(peer) + " is not another rank of " +
                                std::to_string(size_));
}

std::unique_ptr<Work> MpiCommunicator::started(MPI_Request request, const char* op, int peer,
                                               std::vector<at::Tensor> keep_alive) const {
  if (peer < 0 && size_ == 2) peer = 1 - rank_;  // a collective of two waits on the other one
  std::string what = "rank " + std::to_string(world_ranks_[rank_]) + ": " + op + " with ";
  if (peer >= 0) {
    what += "peer " + std::to_string(world_ranks_[peer]);
  } else {  // a collective: MPI cannot tell which member is missing, so name them all
    what += "peers ";
    for (int i = 0, named = 0; i < size_; ++i)
      if (i != rank_) what += (named++ ? "," : "") + std::to_string(world_ranks_[i]);
  }
  return std::make_unique<MpiWork>(request, timeout_seconds(), std::move(what), std::move(keep_alive));
}

std::unique_ptr<Work> MpiCommunicator::isend(const at::Tensor& tensor, int peer, int tag) {
  check_buffer("isend", tensor);
  check_peer("isend", peer);
  MPI_Request r;
  MPI_Isend(tensor.data_ptr(), bytes(tensor), MPI_BYTE, peer, tag, comm_, &r);
  return started(r, "send", peer, {tensor});
}

std::unique_ptr<Work> MpiCommunicator::irecv(at::Tensor& tensor, int peer, int tag) {
  check_buffer("irecv", tensor);
  check_peer("irecv", peer);
  MPI_Request r;
  MPI_Irecv(tensor.data_ptr(), bytes(tensor), MPI_BYTE, peer, tag, comm_, &r);
  return started(r, "recv", peer, {tensor});
}

std::unique_ptr<Work> MpiCommunicator::iall_reduce_sum(at::Tensor& tensor) {
  check_buffer("iall_reduce_sum", tensor);
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()),
                 sum_type("iall_reduce_sum", tensor), MPI_SUM, comm_, &r);
  return started(r, "all_reduce_sum", -1, {tensor});
}

void MpiCommunicator::send(const at::Tensor& tensor, int peer, int tag) { isend(tensor, peer, tag)->wait(); }
void MpiCommunicator::recv(at::Tensor& tensor, int peer, int tag) { irecv(tensor, peer, tag)->wait(); }
void MpiCommunicator::all_reduce_sum(at::Tensor& tensor) { iall_reduce_sum(tensor)->wait(); }

at::Tensor MpiCommunicator::all_gather(const at::Tensor& tensor) {
  check_buffer("all_gather", tensor);
  std::vector<int64_t> sizes = tensor.sizes().vec();
  if (sizes.empty()) sizes.push_back(size_);
  else sizes[0] *= size_;
  at::Tensor out = at::empty(sizes, tensor.options());
  check_buffer("all_gather", out);
  MPI_Request r;
  MPI_Iallgather(tensor.data_ptr(), bytes(tensor), MPI_BYTE, out.data_ptr(), bytes(tensor), MPI_BYTE, comm_, &r);
  started(r, "all_gather", -1, {tensor, out})->wait();
  return out;
}

void MpiCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_buffer("broadcast", tensor);
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(size_));
  MPI_Request r;
  MPI_Ibcast(tensor.data_ptr(), bytes(tensor), MPI_BYTE, root, comm_, &r);
  // A receiving rank waits on the root in the first place; the root waits on everyone.
  started(r, "broadcast", rank_ == root ? -1 : root, {tensor})->wait();
}

void MpiCommunicator::barrier() {
  MPI_Request r;
  MPI_Ibarrier(comm_, &r);
  started(r, "barrier", -1, {})->wait();
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  if (color < 0) throw std::invalid_argument("split: colour must be >= 0, got " + std::to_string(color));
  // MPI_Comm_split has no timeout; once every rank has passed this barrier all of them are
  // alive and about to call it, so it cannot wait on a missing one.
  barrier();
  MPI_Comm sub;
  MPI_Comm_split(comm_, color, key, &sub);
  auto result = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(sub, true));
  result->set_timeout_seconds(timeout_seconds());
  return result;
}

}  // namespace gt
