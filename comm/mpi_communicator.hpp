#pragma once
// The Communicator over MPI for contiguous CPU tensors. Send, receive, gather and broadcast
// move raw bytes, so any dtype works (bf16 included); the sum reduction needs a dtype MPI
// can add: float32, float64, int64 (bf16 has no MPI type: convert to float32 first).
//
// Every wait, blocking or not, polls MPI_Test against the deadline instead of calling
// MPI_Wait, which has no timeout. On expiry the rank prints
//   graphtune: error: rank R: OP with peer P timed out after T s (the peer never answered)
// and calls MPI_Abort, which makes mpirun end every rank. Ranks and peers in that line are
// MPI_COMM_WORLD ranks, the numbers mpirun and the logs use, even on a sub-communicator.
#include <mpi.h>

#include <vector>

#include "comm/communicator.hpp"

namespace gt {

class MpiCommunicator final : public Communicator {
 public:
  // MPI_COMM_WORLD; MPI must already be initialised (gt::World does so under mpirun).
  static std::unique_ptr<MpiCommunicator> world();
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(const at::Tensor& tensor, int peer, int tag = 0) override;
  void recv(at::Tensor& tensor, int peer, int tag = 0) override;
  void all_reduce_sum(at::Tensor& tensor) override;
  at::Tensor all_gather(const at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::unique_ptr<Work> isend(const at::Tensor& tensor, int peer, int tag = 0) override;
  std::unique_ptr<Work> irecv(at::Tensor& tensor, int peer, int tag = 0) override;
  std::unique_ptr<Work> iall_reduce_sum(at::Tensor& tensor) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  MPI_Comm comm() const { return comm_; }

 private:
  MpiCommunicator(MPI_Comm comm, bool owned);
  // A Work for a started request; `peer` is a rank of this communicator, or -1 for "any
  // rank of the group" (collectives, where MPI cannot say which member is missing).
  std::unique_ptr<Work> started(MPI_Request request, const char* op, int peer,
                                std::vector<at::Tensor> keep_alive) const;
  void check_peer(const char* op, int peer) const;

  MPI_Comm comm_;
  bool owned_;  // created by split(): freed here; MPI_COMM_WORLD is not ours to free
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;  // this communicator's ranks in MPI_COMM_WORLD, for messages
};

}  // namespace gt
