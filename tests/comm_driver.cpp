// The MPI Communicator under a real mpirun, driven by tests/cli/comm.sh. A program rather
// than a gtest because each case needs several processes, and the fault cases must end
// the whole job. Modes:
//   ops              every operation's result, exactly (values chosen to be exact in float)
//   stall recv|all_reduce   rank 1 never answers; rank 0 waits with a 2 s timeout and must
//                    abort the job with one line naming the operation and the peer
//   killed           rank 1 dies before a collective; mpirun must end the job
// Rank 0 prints "ok NAME" per passed check (after the ranks agree); any mismatch prints
// "FAIL" with the rank and makes that rank exit 1, so mpirun exits non-zero.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/world.hpp"
#include "tests/rank_checks.hpp"

namespace {

using gt::testing::expect;
using gt::testing::failures;


at::Tensor f32(std::initializer_list<float> v) { return at::tensor(std::vector<float>(v)); }

// Even ranks send first, odd ranks receive first (Megatron's order), so a ring of blocking
// calls cannot deadlock whatever MPI's eager limit. True when the right values arrived.
bool ring(gt::Communicator& c, at::ScalarType dtype) {
  const int n = c.size(), r = c.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  at::Tensor out = (at::arange(6) + 100 * r).to(dtype).reshape({2, 3});
  at::Tensor in = at::empty({2, 3}, dtype);
  if (r % 2 == 0) {
    c.send(out, next, 7);
    c.recv(in, prev, 7);
  } else {
    c.recv(in, prev, 7);
    c.send(out, next, 7);
  }
  return at::equal(in, (at::arange(6) + 100 * prev).to(dtype).reshape({2, 3}));
}

void ops(gt::Communicator& c) {
  const int n = c.size(), r = c.rank();
  const int64_t tri = int64_t(n) * (n - 1) / 2;  // 0 + 1 + ... + (n-1)

  expect(c, "send/recv ring float32", ring(c, at::kFloat));
  expect(c, "send/recv ring bfloat16", ring(c, at::kBFloat16));

  at::Tensor x = at::arange(5, at::kFloat) + r;  // sum over ranks: n*i + tri
  c.all_reduce_sum(x);
  expect(c, "all_reduce_sum float32", at::equal(x, at::arange(5, at::kFloat) * n + tri));
  at::Tensor d = at::full({3}, 0.5 * r, at::kDouble);
  c.all_reduce_sum(d);
  expect(c, "all_reduce_sum float64", at::equal(d, at::full({3}, 0.5 * tri, at::kDouble)));
  // Past 2^53, so a detour through double would show.
  at::Tensor l = at::full({2}, (int64_t(1) << 60) + r, at::kLong);
  c.all_reduce_sum(l);
  expect(c, "all_reduce_sum int64 exact",
         at::equal(l, at::full({2}, (int64_t(n) << 60) + tri, at::kLong)));
  at::Tensor b = at::ones({2}, at::kBFloat16);
  bool rejected = false;
  try {
    c.all_reduce_sum(b);
  } catch (const std::invalid_argument& e) {
    rejected = std::string(e.what()).find("cannot sum BFloat16") != std::string::npos;
  }
  expect(c, "all_reduce_sum rejects bfloat16 with a message", rejected);
  bool strided = false;
  try {
    at::Tensor t = at::zeros({4, 4}).t();
    c.all_reduce_sum(t);
  } catch (const std::invalid_argument& e) {
    strided = std::string(e.what()).find("contiguous CPU tensor") != std::string::npos;
  }
  expect(c, "non-contiguous tensors are rejected", strided);

  at::Tensor g = c.all_gather(at::full({2, 3}, r, at::kFloat));
  bool order = g.sizes() == at::IntArrayRef{2 * n, 3};
  for (int i = 0; order && i < n; ++i) order = at::equal(g.narrow(0, 2 * i, 2), at::full({2, 3}, i, at::kFloat));
  expect(c, "all_gather concatenates along dim 0 in rank order", order);
  at::Tensor gb = c.all_gather(at::full({1}, r + 0.5, at::kBFloat16));
  expect(c, "all_gather bfloat16", at::equal(gb, at::arange(n, at::kFloat).add(0.5).to(at::kBFloat16)));
  at::Tensor g0 = c.all_gather(at::scalar_tensor(int64_t(r) * 3, at::kLong));
  expect(c, "all_gather of 0-dim tensors", at::equal(g0, at::arange(n, at::kLong) * 3));

  const int root = n - 1;  // not rank 0, so "root" is not confused with "rank 0"
  at::Tensor bc = r == root ? f32({1.5f, -2.f, 3.25f}) : at::zeros({3});
  c.broadcast(bc, root);
  expect(c, "broadcast from rank " + std::to_string(root), at::equal(bc, f32({1.5f, -2.f, 3.25f})));

  // All posted before any wait: a receive, two sends told apart by tag (received in the
  // opposite order to their posting), and a reduction, with work done meanwhile.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  at::Tensor a_in = at::empty({4}), b_in = at::empty({4}), red = at::full({4}, r, at::kFloat);
  auto recv_b = c.irecv(b_in, prev, 2);
  auto recv_a = c.irecv(a_in, prev, 1);
  auto send_a = c.isend(at::full({4}, r, at::kFloat), next, 1);
  auto send_b = c.isend(at::full({4}, -r, at::kFloat), next, 2);
  auto reduce = c.iall_reduce_sum(red);
  const double overlapped = at::mm(at::ones({64, 64}), at::ones({64, 64})).sum().item<double>();
  reduce->wait();
  recv_a->wait();
  recv_b->wait();
  send_a->wait();
  send_b->wait();
  send_b->wait();  // a second wait is harmless
  expect(c, "isend/irecv/iall_reduce_sum overlap, tags keep streams apart",
         overlapped == 64.0 * 64 * 64 && at::equal(a_in, at::full({4}, prev, at::kFloat)) &&
             at::equal(b_in, at::full({4}, -prev, at::kFloat)) && at::equal(red, at::full({4}, tri, at::kFloat)));

  // The same ring as one group, as the pipeline posts its paired messages.
  at::Tensor c_in = at::empty({4}), d_in = at::empty({4});
  c.batch_isend_irecv({{false, c_in, prev, 3}, {false, d_in, prev, 4}, {true, at::full({4}, 2 * r, at::kFloat), next, 3},
                       {true, at::full({4}, 3 * r, at::kFloat), next, 4}})
      ->wait();
  expect(c, "batch_isend_irecv ring", at::equal(c_in, at::full({4}, 2 * prev, at::kFloat)) &&
                                          at::equal(d_in, at::full({4}, 3 * prev, at::kFloat)));

  // Two sub-communicators by parity, ordered by rank: what a dp/tp grid does.
  auto sub = c.split(r % 2, r);
  int64_t same_parity = 0, count = 0;
  for (int i = r % 2; i < n; i += 2) same_parity += i, ++count;
  at::Tensor s = at::full({2}, r, at::kLong);
  sub->all_reduce_sum(s);
  expect(c, "split by parity: sizes and ranks",
         sub->size() == count && sub->rank() == r / 2 && sub->timeout_seconds() == c.timeout_seconds());
  expect(c, "split by parity: all_reduce_sum within each half", at::equal(s, at::full({2}, same_parity, at::kLong)));
  if (n >= 4) expect(c, "split by parity: ring within each half", ring(*sub, at::kFloat));
  c.barrier();
}

int body(int argc, char** argv) {
  gt::World world(&argc, &argv);
  if (argc < 2 || !world.under_mpi()) {
    std::fprintf(stderr, "usage: mpirun -np N %s ops|stall recv|stall all_reduce|killed\n", argv[0]);
    return 2;
  }
  auto comm = gt::MpiCommunicator::world();
  const std::string mode = argv[1];
  if (mode == "ops") {
    ops(*comm);
    return failures ? 1 : 0;
  }
  if (mode == "stall" && argc == 3) {
    // Rank 1 sleeps far past the timeout: only the abort can end the job in time.
    if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    comm->set_timeout_seconds(2);
    at::Tensor t = at::zeros({4});
    if (std::string(argv[2]) == "recv" && comm->rank() == 0) comm->recv(t, 1, 0);
    if (std::string(argv[2]) == "all_reduce") comm->all_reduce_sum(t);
    std::printf("FAIL rank %d: the stalled operation returned\n", comm->rank());
    return 1;
  }
  if (mode == "killed") {
    // The timeout is longer than the test allows, so the job ends only if mpirun notices.
    comm->set_timeout_seconds(120);
    comm->barrier();
    if (comm->rank() == 1) std::_Exit(1);  // no MPI_Finalize, as a crash would
    at::Tensor t = at::zeros({4});
    comm->all_reduce_sum(t);
    std::printf("FAIL rank %d: the all_reduce_sum with a dead rank returned\n", comm->rank());
    return 1;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) { return gt::testing::run_driver("comm_driver", body, argc, argv); }
