// Packed attention's two ways agree: one causal kernel per segment on views (the CPU's), and the
// row layout a variable-length kernel reads (flash attention's on a GPU), here through a CPU
// kernel that runs each segment of the rows on its own. With records that share the prompt
// prefix and one that does not, grouped-query heads, outputs and the gradients of q, k and v.
// Each also equals every record attending in a row of its own.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/packed_attention.hpp"

namespace {

using namespace gt;

// Rows [M, heads, hd], segments bounded by cu: each causal within itself, as flash's varlen does.
torch::Tensor cpu_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& cu,
                         int64_t longest) {
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i + 1 < cu.size(0); ++i) {
    const int64_t a = cu[i].item<int64_t>(), n = cu[i + 1].item<int64_t>() - a;
    EXPECT_LE(n, longest);
    auto view = [&](const torch::Tensor& t) { return t.narrow(0, a, n).transpose(0, 1).unsqueeze(0); };
    out.push_back(at::scaled_dot_product_attention(view(q), view(k), view(v), std::nullopt, 0.0, true, std::nullopt,
                                                   q.size(1) != k.size(1))
                      .squeeze(0)
                      .transpose(0, 1));
  }
  return torch::cat(out, 0);
}

struct Grads {
  torch::Tensor y, dq, dk, dv;
};
Grads run(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>& f,
          const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0, const torch::Tensor& dy) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
  auto y = f(q, k, v);
  (y * dy).sum().backward();
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_close(const Grads& a, const Grads& b) {
  EXPECT_TRUE(torch::allclose(a.y, b.y, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(a.dq, b.dq, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(a.dk, b.dk, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(a.dv, b.dv, 1e-10, 1e-10));
}

TEST(PackedAttention, SegmentsAndRowsAgreeWithThePrefixSharedAndEachRecordInItsOwnRow) {
  // A prefix of 3, then records of 4 (sharing it), 5 (whole: begins otherwise) and 2 (sharing).
  PackedRecords p;
  p.prefix = 3;
  p.lengths = {4, 5, 2};
  p.after_prefix = {true, false, true};
  const int64_t T = p.tokens(), H = 4, KV = 2, hd = 8;
  ASSERT_EQ(T, 14);
  torch::manual_seed(3);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const auto q = torch::randn({1, H, T, hd}, opts), k = torch::randn({1, KV, T, hd}, opts),
             v = torch::randn({1, KV, T, hd}, opts), dy = torch::randn({1, T, H, hd}, opts);
  const PackedAttention plan(p, torch::kCPU);
  EXPECT_EQ(plan.segments, (std::vector<int64_t>{7, 5, 5}));
  EXPECT_EQ(plan.longest, 7);
  const Grads segments = run([&](auto q, auto k, auto v) { return segment_attention(q, k, v, plan); }, q, k, v, dy);
  const Grads rows = run([&](auto q, auto k, auto v) { return varlen_attention(q, k, v, plan, torch::kDouble, cpu_varlen); },
                         q, k, v, dy);
  expect_close(segments, rows);

  // Each record in a row of its own: the prefix's rows then its own, or its own alone.
  const Grads own = run(
      [&](auto q, auto k, auto v) {
        std::vector<torch::Tensor> out(static_cast<size_t>(T));
        auto attend = [&](std::vector<int64_t> idx, int64_t keep_from) {
          const auto i = torch::tensor(idx);
          auto y = at::scaled_dot_product_attention(q.index_select(2, i), k.index_select(2, i), v.index_select(2, i),
                                                    std::nullopt, 0.0, true, std::nullopt, true)
                       .transpose(1, 2);
          for (size_t t = static_cast<size_t>(keep_from); t < idx.size(); ++t)
            out[static_cast<size_t>(idx[t])] = y.select(1, static_cast<int64_t>(t));
        };
        attend({0, 1, 2, 3, 4, 5, 6}, 0);  // the first sharer: its outputs and the prefix's
        attend({7, 8, 9, 10, 11}, 0);
        attend({0, 1, 2, 12, 13}, 3);
        return torch::stack(out, 1);
      },
      q, k, v, dy);
  expect_close(segments, own);
}

TEST(PackedAttention, WithoutAPrefixTheRowIsTheSegments) {
  PackedRecords p;
  p.lengths = {3, 6};
  const PackedAttention plan(p, torch::kCPU);
  EXPECT_FALSE(plan.gather.defined());
  EXPECT_FALSE(plan.scatter.defined());
  EXPECT_EQ(plan.segments, (std::vector<int64_t>{3, 6}));
  EXPECT_TRUE(plan.cu_seqlens.equal(torch::tensor(std::vector<int32_t>{0, 3, 9})));
  torch::manual_seed(4);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const auto q = torch::randn({1, 2, 9, 4}, opts), k = torch::randn({1, 2, 9, 4}, opts),
             v = torch::randn({1, 2, 9, 4}, opts), dy = torch::randn({1, 9, 2, 4}, opts);
  expect_close(run([&](auto q, auto k, auto v) { return segment_attention(q, k, v, plan); }, q, k, v, dy),
               run([&](auto q, auto k, auto v) { return varlen_attention(q, k, v, plan, torch::kDouble, cpu_varlen); },
                   q, k, v, dy));
}

}  // namespace
