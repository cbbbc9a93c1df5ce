// Tensor-parallel linear layers (parallel/tensor_parallel.hpp) under a real mpirun, driven by
// tests/cli/tensor_parallel.sh. Every rank also runs the unsplit layer in its own process
// from the same seeded weights and inputs; the parallel forward, the input gradient and each
// shard's gradient must match that reference (a shard's gradient is the matching slice of
// the full gradient). Rank 0 prints "ok NAME" per check once every rank agrees; a mismatch
// prints "FAIL" with the rank and its error, and makes that rank exit 1.
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "comm/mpi_communicator.hpp"
#include "comm/world.hpp"
#include "parallel/tensor_parallel.hpp"
#include "tests/rank_checks.hpp"

namespace {

using gt::testing::expect;
using gt::testing::failures;

constexpr double kRelTol = 1e-6;

// Largest difference relative to the reference's largest magnitude: summation order differs
// between the split and the unsplit layer, so float32 results agree to rounding, not bits.
double rel_error(const at::Tensor& got, const at::Tensor& want) {
  if (!got.defined() || got.sizes() != want.sizes()) return 1e30;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>() / scale;
}

void expect_close(gt::Communicator& tp, const std::string& name, const at::Tensor& got, const at::Tensor& want) {
  const double err = rel_error(got, want);
  expect(tp, name, err <= kRelTol, "(relative error " + std::to_string(err) + ")");
}

const int64_t B = 3, N = 5, IN = 8, HIDDEN = 16, OUT = 12;

at::Tensor seeded(uint64_t seed, at::IntArrayRef shape) {
  torch::manual_seed(seed);  // the same numbers on every rank
  return torch::randn(shape);
}

// The slice of a full tensor that rank r's shard holds.
at::Tensor slice_of(const at::Tensor& full, int64_t dim, const gt::Communicator& tp) {
  const int64_t k = full.size(dim) / tp.size();
  return full.narrow(dim, tp.rank() * k, k);
}

// Each operator alone, with integer-valued data so the sums are exact.
void operators(gt::Communicator& tp) {
  const int n = tp.size(), r = tp.rank();
  const double tri = n * (n - 1) / 2.0;
  at::Tensor base = torch::arange(2 * 3 * 4, torch::kFloat).reshape({2, 3, 4});

  {  // copy_to_tp: identity forward; backward sums every rank's gradient
    at::Tensor x = base.clone().requires_grad_(true);
    at::Tensor y = gt::copy_to_tp(x, tp);
    (y * (r + 1)).sum().backward();
    expect(tp, "copy_to_tp forward is the identity", torch::equal(y, base));
    expect(tp, "copy_to_tp backward all-reduces the gradient",
           torch::equal(x.grad(), torch::full({2, 3, 4}, n * (n + 1) / 2.0)));
  }
  {  // reduce_from_tp: sum forward; backward passes the gradient through
    at::Tensor x = (base + r).requires_grad_(true);
    at::Tensor y = gt::reduce_from_tp(x, tp);
    at::Tensor g = base * 2 - 7;
    y.backward(g);
    expect(tp, "reduce_from_tp forward sums over ranks", torch::equal(y, base * n + tri));
    expect(tp, "reduce_from_tp forward leaves its input alone", torch::equal(x.detach(), base + r));
    expect(tp, "reduce_from_tp backward is the identity", torch::equal(x.grad(), g));
    at::Tensor bf = gt::reduce_from_tp(torch::full({3}, r + 1, torch::kBFloat16), tp);
    expect(tp, "reduce_from_tp sums bfloat16 (through float32)",
           bf.scalar_type() == torch::kBFloat16 && torch::equal(bf, torch::full({3}, n * (n + 1) / 2.0, torch::kBFloat16)));
  }
  {  // gather_from_tp: rank r's [2,3,4] becomes columns [4r, 4r+4) of a [2,3,4n]
    at::Tensor x = (base + 100 * r).requires_grad_(true);
    at::Tensor y = gt::gather_from_tp(x, tp);
    std::vector<at::Tensor> pieces;
    for (int i = 0; i < n; ++i) pieces.push_back(base + 100 * i);
    at::Tensor g = torch::arange(2 * 3 * 4 * n, torch::kFloat).reshape({2, 3, 4 * n});
    y.backward(g);
    expect(tp, "gather_from_tp forward concatenates the last dim in rank order",
           y.is_contiguous() && torch::equal(y, torch::cat(pieces, -1)));
    expect(tp, "gather_from_tp backward takes this rank's slice", torch::equal(x.grad(), g.narrow(-1, 4 * r, 4)));
  }
  {  // scatter_to_tp: the inverse
    at::Tensor full = torch::arange(2 * 3 * 4 * n, torch::kFloat).reshape({2, 3, 4 * n});
    at::Tensor x = full.clone().requires_grad_(true);
    at::Tensor y = gt::scatter_to_tp(x, tp);
    y.backward(base + 100 * r);
    std::vector<at::Tensor> grads;
    for (int i = 0; i < n; ++i) grads.push_back(base + 100 * i);
    expect(tp, "scatter_to_tp forward takes this rank's slice", torch::equal(y, full.narrow(-1, 4 * r, 4)));
    expect(tp, "scatter_to_tp backward all-gathers the gradient", torch::equal(x.grad(), torch::cat(grads, -1)));
  }
  bool rejected = false;
  try {
    gt::scatter_to_tp(torch::zeros({2, 4 * n + 1}), tp);
  } catch (const std::invalid_argument& e) {
    rejected = std::string(e.what()).find("not divisible") != std::string::npos;
  }
  expect(tp, "scatter_to_tp rejects a last dim not divisible by tp", rejected);
  rejected = false;
  try {
    gt::ColumnParallelLinear bad(torch::zeros({4 * n + 1, 4}), torch::zeros({4 * n + 1}), tp);
  } catch (const std::invalid_argument& e) {
    rejected = std::string(e.what()).find("not divisible") != std::string::npos;
  }
  expect(tp, "ColumnParallelLinear rejects out not divisible by tp", rejected);
}

// Reference and parallel pass of one layer with the same input and upstream gradient.
struct Pass {
  at::Tensor x, y;
};
Pass run(const std::function<at::Tensor(const at::Tensor&)>& layer, const at::Tensor& input, const at::Tensor& g) {
  Pass p{input.clone().requires_grad_(true), {}};
  p.y = layer(p.x);
  p.y.backward(g);
  return p;
}

at::Tensor leaf(const at::Tensor& t) { return t.clone().requires_grad_(true); }

void column(gt::Communicator& tp) {
  at::Tensor W = seeded(1, {OUT, IN}), b = seeded(2, {OUT}), x = seeded(3, {B, N, IN}), g = seeded(4, {B, N, OUT});
  at::Tensor Wr = leaf(W), br = leaf(b);
  Pass ref = run([&](const at::Tensor& in) { return torch::linear(in, Wr, br); }, x, g);
  gt::ColumnParallelLinear col(W, b, tp);
  Pass par = run([&](const at::Tensor& in) { return col.forward(in); }, x, g);
  expect(tp, "column: shard is a fp32 contiguous leaf of [out/tp, in]",
         col.weight().is_leaf() && col.weight().requires_grad() && col.weight().is_contiguous() &&
             col.weight().sizes() == at::IntArrayRef{OUT / tp.size(), IN} && torch::equal(col.weight(), slice_of(W, 0, tp)));
  expect_close(tp, "column: forward equals the full linear", par.y, ref.y);
  expect_close(tp, "column: input gradient", par.x.grad(), ref.x.grad());
  expect_close(tp, "column: weight shard gradient is its slice", col.weight().grad(), slice_of(Wr.grad(), 0, tp));
  expect_close(tp, "column: bias shard gradient is its slice", col.bias().grad(), slice_of(br.grad(), 0, tp));
  expect(tp, "column: full_weight/full_bias reassemble the originals",
         torch::equal(col.full_weight(), W) && torch::equal(col.full_bias(), b));
}

void row(gt::Communicator& tp) {
  at::Tensor W = seeded(5, {OUT, IN}), b = seeded(6, {OUT}), x = seeded(7, {B, N, IN}), g = seeded(8, {B, N, OUT});
  at::Tensor Wr = leaf(W), br = leaf(b);
  Pass ref = run([&](const at::Tensor& in) { return torch::linear(in, Wr, br); }, x, g);
  gt::RowParallelLinear rowl(W, b, tp);
  Pass par = run([&](const at::Tensor& in) { return rowl.forward(in); }, x, g);
  expect_close(tp, "row: forward equals the full linear", par.y, ref.y);
  expect_close(tp, "row: input gradient", par.x.grad(), ref.x.grad());
  expect_close(tp, "row: weight shard gradient is its slice", rowl.weight().grad(), slice_of(Wr.grad(), 1, tp));
  expect_close(tp, "row: replicated bias gradient is the full one", rowl.bias().grad(), br.grad());
  expect(tp, "row: full_weight reassembles the original", torch::equal(rowl.full_weight(), W));
}

// Megatron's MLP: column split (no gather) -> elementwise -> row split (input already split).
void mlp(gt::Communicator& tp) {
  at::Tensor W1 = seeded(9, {HIDDEN, IN}), b1 = seeded(10, {HIDDEN}), W2 = seeded(11, {OUT, HIDDEN}),
             b2 = seeded(12, {OUT}), x = seeded(13, {B, N, IN}), g = seeded(14, {B, N, OUT});
  at::Tensor W1r = leaf(W1), b1r = leaf(b1), W2r = leaf(W2), b2r = leaf(b2);
  Pass ref = run([&](const at::Tensor& in) { return torch::linear(torch::gelu(torch::linear(in, W1r, b1r)), W2r, b2r); },
                 x, g);
  gt::ColumnParallelLinear fc1(W1, b1, tp, /*gather_output=*/false);
  gt::RowParallelLinear fc2(W2, b2, tp, /*input_is_parallel=*/true);
  at::Tensor hidden;
  Pass par = run(
      [&](const at::Tensor& in) {
        hidden = fc1.forward(in);
        return fc2.forward(torch::gelu(hidden));
      },
      x, g);
  expect(tp, "mlp: the column layer keeps its [.., hidden/tp] piece",
         hidden.sizes() == at::IntArrayRef{B, N, HIDDEN / tp.size()});
  expect_close(tp, "mlp: forward equals the full MLP", par.y, ref.y);
  expect_close(tp, "mlp: input gradient", par.x.grad(), ref.x.grad());
  expect_close(tp, "mlp: fc1 weight shard gradient", fc1.weight().grad(), slice_of(W1r.grad(), 0, tp));
  expect_close(tp, "mlp: fc1 bias shard gradient", fc1.bias().grad(), slice_of(b1r.grad(), 0, tp));
  expect_close(tp, "mlp: fc2 weight shard gradient", fc2.weight().grad(), slice_of(W2r.grad(), 1, tp));
  expect_close(tp, "mlp: fc2 bias gradient", fc2.bias().grad(), b2r.grad());
}

void sgd_step(std::initializer_list<at::Tensor*> params, double lr) {
  torch::NoGradGuard no_grad;
  for (at::Tensor* p : params) {
    p->sub_(p->grad() * lr);
    p->mutable_grad().zero_();
  }
}

// Three SGD steps on the shards land on the same full weights as three on the full layer.
void sgd(gt::Communicator& tp) {
  const double lr = 0.1;
  at::Tensor Wc = seeded(15, {OUT, IN}), bc = seeded(16, {OUT}), Wrw = seeded(17, {OUT, IN}), brw = seeded(18, {OUT});
  gt::ColumnParallelLinear col(Wc, bc, tp);
  gt::RowParallelLinear rowl(Wrw, brw, tp);
  at::Tensor Wc_ref = leaf(Wc), bc_ref = leaf(bc), Wr_ref = leaf(Wrw), br_ref = leaf(brw);
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = seeded(100 + step, {B, N, IN}), target = seeded(200 + step, {B, N, OUT});
    torch::mse_loss(torch::linear(x, Wc_ref, bc_ref), target).backward();
    torch::mse_loss(torch::linear(x, Wr_ref, br_ref), target).backward();
    torch::mse_loss(col.forward(x), target).backward();
    torch::mse_loss(rowl.forward(x), target).backward();
    sgd_step({&Wc_ref, &bc_ref, &Wr_ref, &br_ref, &col.weight(), &col.bias(), &rowl.weight(), &rowl.bias()}, lr);
  }
  expect(tp, "sgd: the weights moved", !torch::allclose(col.full_weight(), Wc, 0, 1e-3));
  expect_close(tp, "sgd: column full_weight after 3 steps", col.full_weight(), Wc_ref);
  expect_close(tp, "sgd: column full_bias after 3 steps", col.full_bias(), bc_ref);
  expect_close(tp, "sgd: row full_weight after 3 steps", rowl.full_weight(), Wr_ref);
  expect_close(tp, "sgd: row bias after 3 steps", rowl.bias(), br_ref);
}

int body(int argc, char** argv) {
  gt::World world(&argc, &argv);
  if (!world.under_mpi()) {
    std::fprintf(stderr, "usage: mpirun -np N %s\n", argv[0]);
    return 2;
  }
  torch::set_num_threads(1);  // ranks share the cores
  auto tp = gt::MpiCommunicator::world();
  tp->set_timeout_seconds(60);
  operators(*tp);
  column(*tp);
  row(*tp);
  mlp(*tp);
  sgd(*tp);
  tp->barrier();
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::testing::run_driver("tp_driver", body, argc, argv); }
