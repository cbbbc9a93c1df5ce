// The data-parallel GradReducer (parallel/grad_reducer.hpp) under a real mpirun, driven by
// tests/cli/grad_reducer.sh. Every rank feeds its own inputs (seeded by rank and micro-step)
// through the same small model; the expected gradient is recomputed on every rank by running
// all ranks' inputs through fresh copies of the model without any reducer, summed in double.
// Rank 0 prints "ok NAME" per check once every rank agrees; a mismatch prints "FAIL" with the
// rank and makes that rank exit 1.
#include <torch/torch.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/world.hpp"
#include "parallel/grad_reducer.hpp"
#include "tests/rank_checks.hpp"

namespace {

using gt::testing::expect;
using gt::testing::failures;


// Five tanh layers 8-16-12-10-6-4: ten parameters of ten different sizes, listed as a module's
// parameters() would be (layer by layer, weight then bias). With `extras`, an `unused` vector
// goes first (never touched by any rank) and a `side` matrix last (used by rank 0 only).
const std::vector<int64_t> kWidths = {8, 16, 12, 10, 6, 4};
constexpr int64_t kBucketBytes = 400;

struct Model {
  std::vector<at::Tensor> params;
  bool extras = false;
};

Model make_model(bool extras) {
  torch::manual_seed(7);  // the same weights on every rank, as after a broadcast
  Model m;
  m.extras = extras;
  if (extras) m.params.push_back(torch::randn({3}));
  for (size_t l = 0; l + 1 < kWidths.size(); ++l) {
    m.params.push_back(torch::randn({kWidths[l + 1], kWidths[l]}) * 0.4);
    m.params.push_back(torch::randn({kWidths[l + 1]}) * 0.1);
  }
  if (extras) m.params.push_back(torch::randn({4, 4}) * 0.3);
  for (auto& p : m.params) p.set_requires_grad(true);
  return m;
}

// One micro-step's loss on `rank`'s data.
at::Tensor loss(const Model& m, int rank, int micro) {
  torch::manual_seed(1000 + 37 * rank + micro);
  at::Tensor x = torch::randn({5, kWidths.front()});
  at::Tensor target = torch::randn({5, kWidths.back()});
  const size_t first = m.extras ? 1 : 0;
  for (size_t l = 0; l + 1 < kWidths.size(); ++l)
    x = torch::tanh(torch::addmm(m.params[first + 2 * l + 1], x, m.params[first + 2 * l].t()));
  if (m.extras && rank == 0) x = x + x.matmul(m.params.back());
  return (x - target).pow(2).sum();
}

// Sum over ranks of each rank's gradient after `micros` accumulated backwards, without any
// reducer; undefined where no rank produced a gradient.
std::vector<at::Tensor> reference(bool extras, int ranks, int micros) {
  std::vector<at::Tensor> sum(make_model(extras).params.size());
  for (int r = 0; r < ranks; ++r) {
    Model m = make_model(extras);
    for (int k = 0; k < micros; ++k) loss(m, r, k).backward();
    for (size_t i = 0; i < sum.size(); ++i) {
      const at::Tensor& g = m.params[i].grad();
      if (!g.defined()) continue;
      sum[i] = sum[i].defined() ? sum[i] + g.to(at::kDouble) : g.to(at::kDouble);
    }
  }
  return sum;
}

// Within 1e-6 of the largest reference entry: only the order of the float32 sum may differ.
bool grads_match(const Model& m, const std::vector<at::Tensor>& want, std::string* why) {
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor& got = m.params[i].grad();
    if (got.defined() != want[i].defined()) {
      *why = "param " + std::to_string(i) + ": grad defined=" + std::to_string(got.defined()) + ", want " +
             std::to_string(want[i].defined());
      return false;
    }
    if (!got.defined()) continue;
    const double err = (got.to(at::kDouble) - want[i]).abs().max().item<double>();
    const double scale = want[i].abs().max().item<double>();
    if (!(err <= 1e-6 * scale) || scale == 0) {
      *why = "param " + std::to_string(i) + ": max error " + std::to_string(err) + " vs scale " + std::to_string(scale);
      return false;
    }
  }
  return true;
}

void clear_grads(Model& m) {
  for (auto& p : m.params) p.mutable_grad() = at::Tensor();
}

void check_grads(gt::Communicator& c, const std::string& name, const Model& m, const std::vector<at::Tensor>& want) {
  std::string why;
  const bool held = grads_match(m, want, &why);
  if (!held) std::printf("     rank %d: %s\n", c.rank(), why.c_str());
  expect(c, name, held);
}

int64_t flat_bytes(const Model& m) {
  int64_t n = 0;
  for (const auto& p : m.params) n += p.numel() + 1;  // gradients plus one "had a gradient" flag each
  return n * 4;
}

void run(gt::Communicator& c) {
  const int n = c.size(), r = c.rank();
  Model model = make_model(false);
  gt::GradReducer reducer(c, model.params, kBucketBytes);
  const int64_t buckets = reducer.stats().buckets;
  // Reverse order, closing at >= 400 bytes: {b4,w4,b3,w3,b2}, {w2}, {b1,w1}, {b0,w0}.
  const std::vector<int64_t> want_bucket = {3, 3, 2, 2, 1, 0, 0, 0, 0, 0};
  expect(c, "10 params in 4 buckets, filled from the last parameter", buckets == 4 && reducer.bucket_of_param() == want_bucket);

  reducer.set_sync(true);
  loss(model, r, 0).backward();
  const gt::GradReducerStats after_backward = reducer.stats();
  reducer.finish();
  expect(c, "every bucket started from a hook before backward returned",
         after_backward.reductions == buckets && after_backward.started_during_backward == buckets &&
             after_backward.started_during_backward >= buckets - 1);
  expect(c, "bytes all-reduced: every gradient once, plus a flag per param", reducer.stats().bytes == flat_bytes(model));
  check_grads(c, "one step: grads are the sum over ranks", model, reference(false, n, 1));

  // Accumulation: two local micro-steps, then the synchronised one; same reducer, next step.
  clear_grads(model);
  const int64_t before = reducer.stats().reductions;
  bool quiet = true;
  for (int k = 0; k < 2; ++k) {
    reducer.set_sync(false);
    loss(model, r, k).backward();
    quiet = quiet && reducer.stats().reductions == before;
  }
  expect(c, "accumulation: no reduction during the two unsynchronised micro-steps", quiet);
  reducer.set_sync(true);
  loss(model, r, 2).backward();
  expect(c, "accumulation: the synchronised micro-step starts every bucket during backward",
         reducer.stats().reductions == before + buckets &&
             reducer.stats().started_during_backward == after_backward.started_during_backward + buckets);
  reducer.finish();
  check_grads(c, "accumulation: grads are the sum over ranks and 3 micro-steps", model, reference(false, n, 3));

  // A graph built while one reducer exists, run after it is gone under a second reducer: the
  // first one's hooks must be gone, or they would fire into a destroyed object.
  {
    Model m2 = make_model(false);
    at::Tensor pending;
    {
      gt::GradReducer first(c, m2.params, kBucketBytes);
      pending = loss(m2, r, 0);
    }
    gt::GradReducer second(c, m2.params, kBucketBytes);
    pending.backward();
    second.finish();
    expect(c, "a destroyed reducer's hooks are removed",
           second.stats().reductions == buckets && second.stats().started_during_backward == buckets);
    check_grads(c, "the second reducer's grads are the sum over ranks", m2, reference(false, n, 1));
  }

  // `side` (last param, so bucket 0) gets a gradient on rank 0 only; `unused` (first param, so
  // the last bucket) on none. Rank 0 starts every bucket but the last during backward, the
  // other ranks none (bucket 0 never fills there); launching in bucket order keeps the ranks'
  // reductions paired all the same.
  {
    Model m3 = make_model(true);
    gt::GradReducer reducer3(c, m3.params, kBucketBytes);
    reducer3.set_sync(true);
    loss(m3, r, 0).backward();
    const int64_t overlapped = reducer3.stats().started_during_backward;
    reducer3.finish();
    const int64_t b3 = reducer3.stats().buckets;
    expect(c, "rank-0-only param: rank 0 starts all buckets but the last in backward, others none",
           overlapped == (r == 0 ? b3 - 1 : 0) && reducer3.stats().reductions == b3);
    check_grads(c, "rank-0-only param gets rank 0's gradient everywhere; a param no rank used keeps no grad", m3,
                reference(true, n, 1));
  }

  bool rejected = false;
  try {
    at::Tensor d = torch::zeros({3}, at::kDouble).set_requires_grad(true);
    gt::GradReducer bad(c, {model.params[0], d}, kBucketBytes);
  } catch (const std::invalid_argument& e) {
    rejected = std::string(e.what()).find("Double") != std::string::npos;
  }
  expect(c, "float64 params are rejected, naming the dtype", rejected);
  c.barrier();
}

int body(int argc, char** argv) {
  gt::World world(&argc, &argv);
  if (!world.under_mpi()) {
    std::fprintf(stderr, "usage: mpirun -np N %s\n", argv[0]);
    return 2;
  }
  at::set_num_threads(1);  // ranks share cores
  auto comm = gt::MpiCommunicator::world();
  comm->set_timeout_seconds(60);
  run(*comm);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::testing::run_driver("dp_driver", body, argc, argv); }
