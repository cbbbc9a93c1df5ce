#pragma once
// The Communicator of a group of one: what a rank uses for an axis of the grid that has size 1,
// and what a job started without mpirun uses for everything. Collectives return their input
// (a sum over one rank is the value itself), so the trainer runs one code path whatever the
// layout, and a one-process run never touches MPI. Point-to-point has no peer to talk to.
#include "comm/communicator.hpp"

namespace gt {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void send(const at::Tensor&, int peer, int) override { no_peer("send", peer); }
  void recv(at::Tensor&, int peer, int) override { no_peer("recv", peer); }
  void all_reduce_sum(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& tensor) override;
  void broadcast(at::Tensor&, int root) override;
  void barrier() override {}
  std::unique_ptr<Work> isend(const at::Tensor&, int peer, int) override { no_peer("isend", peer); }
  std::unique_ptr<Work> irecv(at::Tensor&, int peer, int) override { no_peer("irecv", peer); }
  std::unique_ptr<Work> iall_reduce_sum(at::Tensor&) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  [[noreturn]] static void no_peer(const char* op, int peer);
};

}  // namespace gt
