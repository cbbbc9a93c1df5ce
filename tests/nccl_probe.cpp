// make_world_communicator (comm/comm_backend.hpp) from a real process, driven by
// tests/cli/nccl.sh here and scripts/device/gpu_check.sh on a GPU machine. Modes:
//   open BACKEND    creates the world communicator and prints "rank R of N"; on a machine
//                   without a GPU, "nccl" must end in one line and exit 2
//   ops BACKEND     every operation's values on the backend's device (CPU for mpi, the
//                   rank's GPU for nccl), exactly; "ok NAME" per check on rank 0, FAIL otherwise
//   stall BACKEND   rank 1 never answers a recv; rank 0's 2 s timeout must end the job with
//                   one line naming the rank, its host and GPU, the operation and the peer,
//                   under NCCL while no host thread waits (the watchdog)
// Errors go through gt::run_main: an InputError is one "graphtune: error:" line and exit 2.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_backend.hpp"
#include "comm/world.hpp"
#include "common/error.hpp"

namespace {

int failures = 0;

// Every rank reports whether its side held; rank 0's "ok" means every rank saw the right values.
void expect(gt::Communicator& c, at::Device device, const std::string& name, bool held) {
  if (!held) {
    std::printf("FAIL %s on rank %d\n", name.c_str(), c.rank());
    ++failures;
  }
  at::Tensor bad = at::full({1}, held ? 0 : 1, at::TensorOptions(at::kLong).device(device));
  c.all_reduce_sum(bad);
  if (c.rank() == 0 && bad.cpu().item<int64_t>() == 0) std::printf("ok   %s (%d ranks)\n", name.c_str(), c.size());
  std::fflush(stdout);
}

bool same(const at::Tensor& got, const at::Tensor& want) { return at::equal(got.cpu(), want.cpu()); }

void ops(gt::Communicator& c, at::Device dev, bool nccl) {
  const int n = c.size(), r = c.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t tri = int64_t(n) * (n - 1) / 2;
  auto on = [&](at::ScalarType t) { return at::TensorOptions(t).device(dev); };

  if (n > 1) {  // even ranks send first, odd ranks receive first: a blocking ring cannot deadlock
    at::Tensor out = (at::arange(6, on(at::kFloat)) + 100 * r).reshape({2, 3}), in = at::empty({2, 3}, on(at::kFloat));
    if (r % 2 == 0) c.send(out, next, 7), c.recv(in, prev, 7);
    else c.recv(in, prev, 7), c.send(out, next, 7);
    expect(c, dev, "send/recv ring", same(in, (at::arange(6) + 100 * prev).to(at::kFloat).reshape({2, 3})));
  }
  at::Tensor x = at::arange(5, on(at::kFloat)) + r;
  c.all_reduce_sum(x);
  expect(c, dev, "all_reduce_sum float32", same(x, at::arange(5, at::kFloat) * n + tri));
  at::Tensor l = at::full({2}, (int64_t(1) << 60) + r, on(at::kLong));
  c.all_reduce_sum(l);
  expect(c, dev, "all_reduce_sum int64 exact", same(l, at::full({2}, (int64_t(n) << 60) + tri, at::kLong)));
  if (nccl) {  // NCCL sums bfloat16 natively (MPI cannot); small integers are exact in it
    at::Tensor b = at::full({3}, r + 1, on(at::kBFloat16));
    c.all_reduce_sum(b);
    expect(c, dev, "all_reduce_sum bfloat16", same(b, at::full({3}, tri + n, at::kBFloat16)));
  }
  at::Tensor g = c.all_gather(at::full({2, 3}, r, on(at::kFloat)));
  bool order = g.sizes() == at::IntArrayRef{2 * n, 3};
  for (int i = 0; order && i < n; ++i) order = same(g.narrow(0, 2 * i, 2), at::full({2, 3}, i, at::kFloat));
  expect(c, dev, "all_gather in rank order", order);
  at::Tensor bc = r == n - 1 ? at::tensor({1.5f, -2.f, 3.25f}).to(dev) : at::zeros({3}, on(at::kFloat));
  c.broadcast(bc, n - 1);
  expect(c, dev, "broadcast from the last rank", same(bc, at::tensor({1.5f, -2.f, 3.25f})));

  if (n > 1) {  // a ring: every rank sends and receives in one group, then a reduction behind it
    at::Tensor a_in = at::empty({4}, on(at::kFloat)), b_in = at::empty({4}, on(at::kFloat));
    at::Tensor red = at::full({4}, r, on(at::kFloat));
    std::vector<gt::PointToPoint> ring{{false, a_in, prev, 1}, {false, b_in, prev, 2},
                                       {true, at::full({4}, r, on(at::kFloat)), next, 1},
                                       {true, at::full({4}, -r, on(at::kFloat)), next, 2}};
    auto group = c.batch_isend_irecv(std::move(ring));
    auto reduce = c.iall_reduce_sum(red);
    reduce->wait(), group->wait();
    expect(c, dev, "batch_isend_irecv ring, in posting order, and iall_reduce_sum",
           same(a_in, at::full({4}, prev, at::kFloat)) && same(b_in, at::full({4}, -prev, at::kFloat)) &&
               same(red, at::full({4}, tri, at::kFloat)));
  }
  auto sub = c.split(r % 2, r);
  int64_t same_parity = 0;
  for (int i = r % 2; i < n; i += 2) same_parity += i;
  at::Tensor s = at::full({2}, r, on(at::kLong));
  sub->all_reduce_sum(s);
  expect(c, dev, "split by parity", sub->rank() == r / 2 && same(s, at::full({2}, same_parity, at::kLong)));
  c.barrier();
}

int body(int argc, char** argv) {
  gt::World world(&argc, &argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: [mpirun -np N] %s open|ops|stall mpi|nccl\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const std::optional<gt::Backend> backend = gt::value_named<gt::Backend>(argv[2]);
  if (!backend) gt::fail("[parallelism].backend", "unknown backend '" + std::string(argv[2]) + "' (mpi or nccl)");
  auto comm = gt::make_world_communicator(*backend, 30);
  const bool nccl = *backend == gt::Backend::kNccl;
  const at::Device dev = nccl ? at::Device(at::kCUDA) : at::Device(at::kCPU);  // the GPU the factory selected
  if (mode == "open") {
    comm->barrier();
    std::printf("rank %d of %d\n", comm->rank(), comm->size());
    return 0;
  }
  if (mode == "ops") {
    ops(*comm, dev, nccl);
    return failures ? 1 : 0;
  }
  if (mode == "stall" && comm->size() >= 2) {
    if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    comm->set_timeout_seconds(2);
    at::Tensor t = at::zeros({4}, at::TensorOptions(at::kFloat).device(dev));
    if (comm->rank() == 0) comm->recv(t, 1, 0);
    // Under NCCL the host goes on after recv (only the stream waits): the watchdog must end the
    // job while this thread waits for nothing.
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::printf("FAIL rank %d: nothing ended the stalled job\n", comm->rank());
    return 1;
  }
  std::fprintf(stderr, "unknown mode '%s' (or stall with one rank)\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("graphtune", body, argc, argv); }
