#pragma once
// How ranks exchange tensors, independent of the transport: MPI on CPU tensors
// (comm/mpi_communicator.hpp), NCCL on GPU tensors (comm/nccl/nccl_communicator.hpp). Data, pipeline and tensor
// parallelism are written against this interface only. Operation names follow
// torch.distributed / Megatron (send, recv, all_reduce, all_gather, broadcast, isend, irecv).
//
// Faults: every wait carries a deadline (timeout_seconds). A peer that died or stalled must
// not leave the others waiting forever, so on expiry a backend ends the whole job with one
// line naming the operation and the peer, rather than returning an error the caller could
// ignore and then hang on the next operation.
//
// Only ATen's Tensor class is included here: the full torch headers cost seconds per file.
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace gt {

// A started non-blocking operation. wait() returns once its buffers may be reused (for a
// receive or reduction: once the result is in the tensor). On host tensors (MPI) the host
// waits, and the deadline counts from wait(), so compute overlapped with the transfer does
// not eat into it. On GPU tensors (NCCL) the caller's CUDA stream waits, not the host: what
// is queued on it afterwards sees the result; the deadline counts from the launch.
// Destroying a Work that was never waited for waits for it: MPI must not be left writing
// into a tensor that has been freed.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

// One send or receive of a group (Communicator::batch_isend_irecv).
struct PointToPoint {
  bool send;
  at::Tensor tensor;  // sent from; or received into, with the sender's shape and dtype
  int peer;
  int tag = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Seconds any one wait may last before the job is aborted; <= 0 waits forever.
  double timeout_seconds() const { return timeout_seconds_; }
  void set_timeout_seconds(double seconds) { timeout_seconds_ = seconds; }

  // Point-to-point. recv writes into `tensor`, which must already have the sender's shape
  // and dtype (pipeline stages know their activation shapes in advance). MPI matches messages
  // on their tag; NCCL has no tags and matches the messages between two ranks in the order
  // they are posted. Code that runs on both therefore posts them in the same order on both
  // sides, and gives them distinct tags all the same.
  virtual void send(const at::Tensor& tensor, int peer, int tag = 0) = 0;
  virtual void recv(at::Tensor& tensor, int peer, int tag = 0) = 0;

  // Collectives; every rank of this communicator must call them in the same order.
  virtual void all_reduce_sum(at::Tensor& tensor) = 0;  // in place
  // Every rank's tensor (same shape everywhere), concatenated along dim 0 in rank order;
  // a 0-dim tensor gives a 1-dim result of size().
  virtual at::Tensor all_gather(const at::Tensor& tensor) = 0;
  virtual void broadcast(at::Tensor& tensor, int root) = 0;  // in place; root's values win
  virtual void barrier() = 0;

  // Non-blocking forms: the tensors must stay unchanged (send) or untouched (recv,
  // reduction) until wait() returns; the Work keeps them alive.
  virtual std::unique_ptr<Work> isend(const at::Tensor& tensor, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Work> irecv(at::Tensor& tensor, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Work> iall_reduce_sum(at::Tensor& tensor) = 0;

  // Posts sends and receives as one group, as torch.distributed.batch_isend_irecv; one Work
  // waits for all of them. Under NCCL a send finishes only once its receiver has posted the
  // receive, so two ranks that send to each other each post their send and their receive in
  // one group, or both wait on their send forever (NCCL launches a group as one
  // ncclGroupStart/End). Here, by default, each op is posted on its own: right for MPI,
  // whose operations progress independently.
  virtual std::unique_ptr<Work> batch_isend_irecv(std::vector<PointToPoint> ops);

  // Sub-communicators for the data/pipeline/tensor grid, as MPI_Comm_split: ranks with the
  // same colour form one group, ordered by key (ties by current rank). Collective over this
  // communicator. The new one inherits the timeout.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

 private:
  double timeout_seconds_ = 300;
};

}  // namespace gt
