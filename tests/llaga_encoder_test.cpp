// The llaga graph encoder (LLaGA's neighbourhood-detail template): the tree's Laplacian
// embedding checked against the tree built here slot by slot, the tokens (features, zeros at a
// pad, beside the slot's embedding row), the shape refusals, and its file read back as llaga.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace {

using gt::test::input_error_of;
using gt::test::TempDir;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The tree grown hop by hop as the record builder grows it: each slot of the last hop gets
// `fanout` children, appended in order. Returns each slot's parent (-1 for the centre).
std::vector<int64_t> tree_parents(int64_t hops, int64_t fanout) {
  std::vector<int64_t> parent = {-1}, last = {0};
  for (int64_t h = 0; h < hops; ++h) {
    std::vector<int64_t> next;
    for (int64_t p : last)
      for (int64_t k = 0; k < fanout; ++k) {
        next.push_back(static_cast<int64_t>(parent.size()));
        parent.push_back(p);
      }
    last = next;
  }
  return parent;
}

TEST(LlagaEncoder, StructureEmbeddingIsTheTreesLaplacianEigenbasis) {
  for (auto [hops, fanout] : {std::pair<int64_t, int64_t>{2, 3}, {2, 10}, {3, 2}, {1, 4}}) {
    const auto parent = tree_parents(hops, fanout);
    const int64_t n = static_cast<int64_t>(parent.size());
    ASSERT_EQ(gt::template_tree_slots(hops, fanout), n);
    auto a = torch::zeros({n, n}, torch::kFloat64);
    for (int64_t i = 1; i < n; ++i) a[i][parent[static_cast<size_t>(i)]] = a[parent[static_cast<size_t>(i)]][i] = 1.0;
    const auto deg = a.sum(1);
    const auto lap = torch::eye(n, torch::kFloat64) - a / (deg.unsqueeze(1) * deg.unsqueeze(0)).sqrt();

    const auto pe = gt::template_tree_embedding(hops, fanout).to(torch::kFloat64);
    ASSERT_EQ(pe.sizes().vec(), (std::vector<int64_t>{n, n}));
    EXPECT_LT((pe.t().mm(pe) - torch::eye(n, torch::kFloat64)).abs().max().item<double>(), 1e-5) << n;
    // Each column an eigenvector, in ascending order of eigenvalue.
    const auto lambda = (pe * lap.mm(pe)).sum(0);
    EXPECT_LT((lap.mm(pe) - pe * lambda.unsqueeze(0)).abs().max().item<double>(), 1e-5) << n;
    EXPECT_LT((lambda - torch::linalg_eigvalsh(lap)).abs().max().item<double>(), 1e-5) << n;
    EXPECT_NEAR(lambda[0].item<double>(), 0.0, 1e-6);
    // The sign: each column's first entry above 1e-6 in magnitude is positive.
    const auto first = pe.abs().gt(1e-6).to(torch::kInt64).argmax(0);
    EXPECT_TRUE(pe.gather(0, first.unsqueeze(0)).gt(0).all().item<bool>()) << n;
  }
}

TEST(LlagaEncoder, TokensAreFeaturesBesideTheSlotsEmbedding) {
  gt::GraphEncoder enc(gt::llaga_encoder_config(5, 2, 3));  // 13 slots
  ASSERT_EQ(enc->config().gnn_output, 5 + 13);
  enc->eval();
  const auto parent = tree_parents(2, 3);
  // Slot 2 is a pad (its node had one neighbour), so are its children 7, 8, 9.
  std::vector<int64_t> src, dst;
  for (int64_t i = 1; i < 13; ++i) {
    if (i == 2 || (i >= 7 && i <= 9)) continue;
    src.insert(src.end(), {parent[static_cast<size_t>(i)], i});
    dst.insert(dst.end(), {i, parent[static_cast<size_t>(i)]});
  }
  auto ei = torch::stack({torch::tensor(src), torch::tensor(dst)});
  auto x = torch::randn({13, 5}) + 3.0;  // never zero
  auto out = enc->forward(x, ei);
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{13, 18}));
  for (int64_t i = 0; i < 13; ++i) {
    const bool pad = i == 2 || (i >= 7 && i <= 9);
    EXPECT_TRUE(torch::equal(out[i].slice(0, 0, 5), pad ? torch::zeros({5}) : x[i])) << "slot " << i;
  }
  EXPECT_TRUE(torch::equal(out.slice(1, 5, 18), gt::template_tree_embedding(2, 3)));
  // A centre without neighbours: every other slot a pad, the centre still itself.
  auto lone = enc->forward(x, torch::zeros({2, 0}, torch::kInt64));
  EXPECT_TRUE(torch::equal(lone[0].slice(0, 0, 5), x[0]));
  EXPECT_EQ(lone.slice(0, 1, 13).slice(1, 0, 5).abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(enc->parameters().size() == 1 && enc->parameters()[0].numel() == 13 * 13);

  // In training mode the dropout drops real slots' features, seeded; pads stay zero and the
  // embedding is never dropped.
  enc->set_dropout(0.5);
  enc->train();
  const auto a = enc->forward(x, ei, false, 3), b = enc->forward(x, ei, false, 3);
  EXPECT_TRUE(a.equal(b));
  EXPECT_TRUE(a.slice(1, 5, 18).equal(out.slice(1, 5, 18)));
  const auto kept = a.slice(1, 0, 5).ne(0);
  EXPECT_TRUE(a.slice(1, 0, 5).masked_select(kept).allclose(out.slice(1, 0, 5).masked_select(kept) * 2.0));
  const int64_t real_values = 9 * 5, dropped = real_values - kept.sum().item<int64_t>();
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, real_values);
}

TEST(LlagaEncoder, RefusesOtherShapes) {
  gt::GraphEncoder enc(gt::llaga_encoder_config(5, 2, 3));
  std::string e = input_error_of([&] { enc->forward(torch::randn({24, 5}), torch::zeros({2, 0}, torch::kInt64)); });
  EXPECT_TRUE(contains(e, "24 nodes") && contains(e, "13 slots") && contains(e, "--template llaga --hops 2 --fanout 3"))
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  e = input_error_of([&] { enc->forward(torch::randn({13, 4}), torch::zeros({2, 0}, torch::kInt64)); });
  EXPECT_TRUE(contains(e, "width 4")) << e;
  e = input_error_of([&] { gt::GraphEncoder{gt::llaga_encoder_config(5, 3, 20)}; });  // 8,421 slots
  EXPECT_TRUE(contains(e, "more than 4096 slots")) << e;
  auto wrong = gt::llaga_encoder_config(5, 2, 3);
  wrong.gnn_output = 128;
  e = input_error_of([&] { gt::GraphEncoder{wrong}; });
  EXPECT_TRUE(contains(e, "gnn_input + its 13 slots (18)")) << e;
  e = input_error_of([&] { enc->forward_split(torch::randn({13, 5}), {}, [](const torch::Tensor& t) { return t; }); });
  EXPECT_TRUE(contains(e, "whole graph")) << e;
}

TEST(LlagaEncoder, FileReadsBackAsLlaga) {
  TempDir dir;
  gt::GraphEncoder enc(gt::llaga_encoder_config(7, 2, 4));
  enc->save_safetensors(dir.file("enc.safetensors"));
  const auto meta = gt::SafetensorsFile::open(dir.file("enc.safetensors")).metadata();
  EXPECT_EQ(meta.at("graph_encoder_type"), "llaga");
  EXPECT_EQ(meta.at("gnn_input"), "7");
  gt::GraphEncoder back = gt::open_graph_encoder(dir.file("enc.safetensors"), "");
  ASSERT_TRUE(back->config().is_llaga());
  EXPECT_EQ(back->config().gnn_input, 7);
  EXPECT_EQ(back->config().llaga_hops, 2);
  EXPECT_EQ(back->config().llaga_fanout, 4);
  EXPECT_EQ(back->config().gnn_output, 7 + 21);
  EXPECT_TRUE(torch::equal(back->named_weights()[0].second, enc->named_weights()[0].second));
  // Without the metadata the feature width is unknown: refused, not guessed.
  gt::save_torch_state_dict(dir.file("enc.pkl"), enc->named_weights());
  std::string e = input_error_of([&] { gt::open_graph_encoder(dir.file("enc.pkl"), ""); });
  EXPECT_TRUE(contains(e, "enc.pkl") && contains(e, "without graphtune's metadata")) << e;
  gt::save_safetensors(dir.file("bad.safetensors"), enc->named_weights(),
                       {{"graph_encoder_type", "llaga"}, {"gnn_input", "7"}, {"llaga_hops", "two"}, {"llaga_fanout", "4"}});
  e = input_error_of([&] { gt::open_graph_encoder(dir.file("bad.safetensors"), ""); });
  EXPECT_TRUE(contains(e, "llaga_hops") && contains(e, "\"two\"")) << e;
  // The tree the metadata names must be the embedding's.
  gt::save_safetensors(dir.file("other.safetensors"), enc->named_weights(),
                       {{"graph_encoder_type", "llaga"}, {"gnn_input", "7"}, {"llaga_hops", "2"}, {"llaga_fanout", "3"}});
  e = input_error_of([&] { gt::open_graph_encoder(dir.file("other.safetensors"), ""); });
  EXPECT_TRUE(contains(e, "structure_embedding")) << e;
}

}  // namespace
