// LLaGA's hop-field overview: the table (each node's features after 0..K steps of the GCN's
// propagation) against the same propagation as dense float64 matrices, thread counts giving the
// same bytes; the encoder's tokens (hop k's block of row k beside a one-hot of k); the records'
// graph; the shape refusals; and its file read back as hop_field.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "data/graph_sampling.hpp"
#include "data/synthetic_graph.hpp"
#include "loader/hop_field.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "weights/safetensors.hpp"

namespace {

using gt::test::input_error_of;
using gt::test::TempDir;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

gt::TextGraph small_graph() {
  gt::SyntheticGraphParams p;
  p.nodes = 300;
  p.feature_dim = 16;
  return gt::make_synthetic_graph(p);
}

TEST(HopField, IsTheGcnPropagationOfTheWholeGraph) {
  const gt::TextGraph g = small_graph();
  const int64_t n = g.num_nodes(), f = g.feature_dim, hops = 3;
  // Dense, from the citation list rather than the adjacency the table reads.
  auto a = torch::eye(n, torch::kFloat64);
  for (auto [u, v] : g.edges) a[u][v] = a[v][u] = 1.0;
  const auto d = a.sum(1).rsqrt();
  const auto a_hat = d.unsqueeze(1) * a * d.unsqueeze(0);
  auto x = torch::from_blob(const_cast<float*>(g.features.data()), {n, f}, torch::kFloat32).to(torch::kFloat64);
  std::vector<torch::Tensor> want = {x};
  for (int64_t k = 0; k < hops; ++k) want.push_back(a_hat.mm(want.back()));

  const torch::Tensor got = gt::hop_field(g, hops);
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{n, (hops + 1) * f}));
  EXPECT_EQ(got.scalar_type(), torch::kFloat32);
  const auto expected = torch::cat(want, 1);
  EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), 1e-6 * expected.abs().max().item<double>());
  EXPECT_TRUE(got.slice(1, 0, f).equal(x.to(torch::kFloat32)));  // hop 0 is the features as they are

  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor serial = gt::hop_field(g, hops);
  at::set_num_threads(threads);
  EXPECT_TRUE(serial.equal(got)) << "the bytes depend on the thread count";

  const auto table = gt::hop_field_table(g, hops);
  ASSERT_EQ(table.x.count(g.name), 1u);
  EXPECT_TRUE(table.x.at(g.name).equal(got));
  for (int64_t bad : {0, 33})
    EXPECT_TRUE(contains(input_error_of([&] { gt::hop_field(g, bad); }), "hops must be in [1, 32]")) << bad;
}

// Rows "l1" and "l2": the same propagation of the features with each row over its L1 or L2 norm,
// a row of zeros left as it is; the base (below) still reads the features as they are.
TEST(HopField, NormalisedRowsAreTheFieldOfTheNormalisedFeatures) {
  gt::TextGraph g = small_graph();
  const int64_t n = g.num_nodes(), f = g.feature_dim, hops = 3;
  // The synthetic rows are of unit L2 norm: scaled row by row here, so that "l2" has work to do.
  for (int64_t v = 0; v < n; ++v)
    for (int64_t j = 0; j < f; ++j) g.features[v * f + j] *= v == 5 ? 0.0f : static_cast<float>(1 + v % 4);  // 5: no words
  auto x = torch::from_blob(g.features.data(), {n, f}, torch::kFloat32).to(torch::kFloat64);
  auto a = torch::eye(n, torch::kFloat64);
  for (auto [u, v] : g.edges) a[u][v] = a[v][u] = 1.0;
  const auto d = a.sum(1).rsqrt();
  const auto a_hat = d.unsqueeze(1) * a * d.unsqueeze(0);
  for (const char* rows : {"l1", "l2"}) {
    const bool l1 = std::string(rows) == "l1";
    const auto norm = l1 ? x.abs().sum(1, true) : x.square().sum(1, true).sqrt();
    ASSERT_GT(norm.max().item<double>(), 1.5) << "rows already of norm one would test nothing";
    std::vector<torch::Tensor> want = {x / torch::where(norm.eq(0), torch::ones_like(norm), norm)};
    for (int64_t k = 0; k < hops; ++k) want.push_back(a_hat.mm(want.back()));
    const auto expected = torch::cat(want, 1);

    const torch::Tensor got = gt::hop_field(g, hops, rows);
    ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{n, (hops + 1) * f})) << rows;
    EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), 1e-6) << rows;
    const auto first = got.slice(1, 0, f).to(torch::kFloat64);
    EXPECT_TRUE(first[5].eq(0).all().item<bool>()) << rows << ": a row of zeros stays zero";
    EXPECT_NEAR((l1 ? first[0].abs().sum() : first[0].square().sum().sqrt()).item<double>(), 1.0, 1e-6) << rows;
    EXPECT_FALSE(got.equal(gt::hop_field(g, hops, "as_is"))) << rows;
    EXPECT_TRUE(gt::hop_field_table(g, hops, rows).x.at(g.name).equal(got)) << rows;
  }
  EXPECT_TRUE(contains(input_error_of([&] { gt::hop_field(g, hops, "l3"); }),
                       "rows must be \"as_is\", \"l1\" or \"l2\", got \"l3\""));
}

// With a base, the rows propagated are the features beside the base's standardised output over
// the whole graph, and the base's file travels inside the hop field's.
TEST(HopField, ABaseEncodersOutputStandsBesideTheFeatures) {
  const gt::TextGraph g = small_graph();
  const int64_t n = g.num_nodes(), f = g.feature_dim, hops = 2;
  gt::GraphEncoderConfig bc;
  bc.gnn_type = "gcn";
  bc.gnn_input = f, bc.gnn_hid = 8, bc.gnn_output = 6;
  auto base = std::make_shared<gt::GraphEncoderImpl>(bc);
  base->init_weights(3);
  // The GCN over the whole graph, from the citation list; then standardised by hand.
  std::vector<int64_t> src, dst;
  for (auto [u, v] : g.edges) src.insert(src.end(), {u, v}), dst.insert(dst.end(), {v, u});
  const auto x = torch::from_blob(const_cast<float*>(g.features.data()), {n, f}, torch::kFloat32).clone();
  torch::Tensor z;
  {
    torch::NoGradGuard ng;
    base->eval();
    z = base->forward(x, torch::stack({torch::tensor(src), torch::tensor(dst)})).to(torch::kFloat64);
    base->train();
  }
  z = (z - z.mean(0)) / z.std(0, false);
  auto a = torch::eye(n, torch::kFloat64);
  for (auto [u, v] : g.edges) a[u][v] = a[v][u] = 1.0;
  const auto d = a.sum(1).rsqrt();
  const auto a_hat = d.unsqueeze(1) * a * d.unsqueeze(0);
  std::vector<torch::Tensor> want = {torch::cat({x.to(torch::kFloat64), z}, 1)};
  for (int64_t k = 0; k < hops; ++k) want.push_back(a_hat.mm(want.back()));
  const auto expected = torch::cat(want, 1);

  const torch::Tensor got = gt::hop_field(g, hops, "as_is", base.get());
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{n, (hops + 1) * (f + 6)}));
  EXPECT_LT((got.to(torch::kFloat64) - expected).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(base->is_training()) << "the base is put back in the mode it was in";

  // The encoder over it, and its file: the base's tensors under "base.", read back as its kind.
  gt::GraphEncoder enc(std::make_shared<gt::GraphEncoderImpl>(gt::hop_field_encoder_config(f + 6, hops), base));
  EXPECT_EQ(enc->config().gnn_input, (hops + 1) * (f + 6));
  TempDir dir;
  const std::string path = dir.path + "/field.safetensors";
  enc->save_safetensors(path);
  EXPECT_EQ(gt::SafetensorsFile::open(path).metadata().at("hop_field_base"), "gcn");
  gt::GraphEncoder back = gt::open_graph_encoder(path, "");
  ASSERT_TRUE(back->field_base() != nullptr);
  EXPECT_TRUE(back->field_base()->config().is_gcn());
  EXPECT_TRUE(gt::hop_field(g, hops, "as_is", back->field_base().get()).equal(got));
  // With rows "l1" only the features' part changes: the base reads the features as they are.
  const torch::Tensor l1 = gt::hop_field(g, hops, "l1", base.get());
  EXPECT_TRUE(l1.slice(1, f, f + 6).equal(got.slice(1, f, f + 6)));
  EXPECT_FALSE(l1.slice(1, 0, f).equal(got.slice(1, 0, f)));

  // A base of another feature width, or of a template kind, is refused.
  bc.gnn_input = f + 1;
  auto wide = std::make_shared<gt::GraphEncoderImpl>(bc);
  EXPECT_TRUE(contains(input_error_of([&] { gt::hop_field(g, hops, "as_is", wide.get()); }), "reads 17-wide features"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         gt::GraphEncoderImpl(gt::hop_field_encoder_config(f + 6, hops),
                                              std::make_shared<gt::GraphEncoderImpl>(gt::hop_field_encoder_config(f, 1)));
                       }),
                       "not hop_field"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         gt::GraphEncoderImpl(gt::hop_field_encoder_config(f + 7, hops), base);
                       }),
                       "has hops 22 wide, not 23"));
}

TEST(HopField, RecordsHoldTheCentreOnceAHop) {
  const gt::Subgraph s = gt::hop_field_graph(17, 4);
  EXPECT_EQ(s.center, 17);
  EXPECT_EQ(s.node_list, (std::vector<int32_t>(5, 17)));
  EXPECT_TRUE(s.edge_index[0].empty() && s.edge_index[1].empty());
  EXPECT_TRUE(contains(input_error_of([] { gt::hop_field_graph(3, 0); }), "hops must be in [1, 32], got 0"));
}

TEST(HopFieldEncoder, TokenKIsHopKBesideItsOneHot) {
  const int64_t f = 5, hops = 3, n = hops + 1;
  const gt::GraphEncoderConfig c = gt::hop_field_encoder_config(f, hops);
  EXPECT_EQ(c.gnn_input, f * n);
  EXPECT_EQ(c.gnn_output, f + n);
  EXPECT_EQ(c.template_nodes(), n);
  EXPECT_TRUE(c.is_template());
  gt::GraphEncoder enc(c);
  const auto x = torch::randn({n, f * n});
  const auto out = enc->forward(x, torch::zeros({2, 0}, torch::kInt64));
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{n, f + n}));
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_TRUE(out[k].slice(0, 0, f).equal(x[k].slice(0, k * f, (k + 1) * f))) << k;
    EXPECT_TRUE(out[k].slice(0, f).equal(torch::one_hot(torch::tensor(k), n).to(torch::kFloat32))) << k;
  }
  // Its one parameter is fixed: the trainer never lets it train, and nothing is drawn.
  const auto named = enc->named_weights();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "hop_embedding");

  const std::string wrong = input_error_of([&] { enc->forward(torch::randn({n + 1, f * n}), torch::zeros({2, 0}, torch::kInt64)); });
  EXPECT_TRUE(contains(wrong, "a graph of 5 nodes; the hop_field encoder reads its centre once a hop, 4 times (hops 3)"))
      << wrong;
  EXPECT_TRUE(contains(wrong, "graphtune data build --template hop_field --hops 3")) << wrong;
  EXPECT_TRUE(contains(input_error_of([&] { enc->forward_split(x, {}, [](const torch::Tensor& t) { return t; }); }),
                       "the hop_field encoder reads LLaGA's records"));
}

TEST(HopFieldEncoder, PerHopTokenKHoldsHopKInBlockK) {
  const int64_t f = 5, hops = 3, n = hops + 1;
  const gt::GraphEncoderConfig c = gt::hop_field_encoder_config(f, hops, "as_is", "per_hop");
  EXPECT_EQ(c.gnn_input, f * n);
  EXPECT_EQ(c.gnn_output, f * n + n);
  gt::GraphEncoder enc(c);
  const auto x = torch::randn({n, f * n});
  const auto out = enc->forward(x, torch::zeros({2, 0}, torch::kInt64));
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{n, f * n + n}));
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      const auto block = out[k].slice(0, j * f, (j + 1) * f);
      EXPECT_TRUE(j == k ? block.equal(x[k].slice(0, k * f, (k + 1) * f)) : block.eq(0).all().item<bool>()) << k << " " << j;
    }
    EXPECT_TRUE(out[k].slice(0, f * n).equal(torch::one_hot(torch::tensor(k), n).to(torch::kFloat32))) << k;
  }
  // So one linear projector over these tokens is each hop's own map: W's block k reads hop k.
  const auto w = torch::randn({7, f * n + n});
  const auto projected = torch::matmul(out, w.t());
  for (int64_t k = 0; k < n; ++k)
    EXPECT_TRUE(projected[k].allclose(torch::matmul(w.slice(1, k * f, (k + 1) * f), x[k].slice(0, k * f, (k + 1) * f)) +
                                      w.select(1, f * n + k), 1e-5, 1e-5)) << k;
}

TEST(HopFieldEncoder, DropoutDropsTheFeaturesNeverTheOneHot) {
  const int64_t f = 200, hops = 3, n = hops + 1;
  gt::GraphEncoder enc(gt::hop_field_encoder_config(f, hops));
  enc->set_dropout(0.5);
  const auto x = torch::rand({n, f * n}).add_(0.5);  // no zeros: a zero out of it is a drop
  const auto ei = torch::zeros({2, 0}, torch::kInt64);
  enc->eval();
  const auto eval = enc->forward(x, ei, false, 7);
  EXPECT_TRUE(eval.slice(1, 0, f).equal(x.view({n, n, f}).diagonal(0, 0, 1).t())) << "no dropout in eval mode";
  enc->train();
  const auto a = enc->forward(x, ei, false, 7), b = enc->forward(x, ei, false, 7), c = enc->forward(x, ei, false, 8);
  EXPECT_TRUE(a.equal(b)) << "the same seed draws the same masks";
  EXPECT_FALSE(a.equal(c));
  EXPECT_TRUE(a.slice(1, f).equal(eval.slice(1, f))) << "the one-hot is never dropped";
  const auto features = a.slice(1, 0, f), kept = features.ne(0);
  EXPECT_TRUE(features.masked_select(kept).allclose(eval.slice(1, 0, f).masked_select(kept) * 2.0));
  const double share = kept.to(torch::kFloat64).mean().item<double>();
  EXPECT_GT(share, 0.4);
  EXPECT_LT(share, 0.6);
  for (int64_t k = 1; k < n; ++k) EXPECT_FALSE(kept[k].equal(kept[0])) << "hop " << k << " has its own mask";
}

TEST(HopFieldEncoder, ConfigProblemsAreNamed) {
  gt::GraphEncoderConfig c = gt::hop_field_encoder_config(4, 2);
  c.gnn_input = 13;
  EXPECT_TRUE(contains(c.problem(), "is not a multiple of 3"));
  c = gt::hop_field_encoder_config(4, 2);
  c.gnn_output = 4;
  EXPECT_TRUE(contains(c.problem(), "gnn_output is one hop's width + its 3 hops (7), got 4"));
  EXPECT_TRUE(contains(gt::hop_field_encoder_config(4, 40).problem(), "hops must be in [1, 32], got 40"));
  EXPECT_TRUE(contains(gt::hop_field_encoder_config(4, 2, "unit").problem(),
                       "rows must be \"as_is\", \"l1\" or \"l2\", got \"unit\""));
  EXPECT_EQ(gt::hop_field_encoder_config(4, 2, "l1").problem(), "");
  EXPECT_EQ(gt::hop_field_encoder_config(4, 2, "l2").problem(), "");
  EXPECT_TRUE(contains(gt::hop_field_encoder_config(4, 2, "l2", "diagonal").problem(),
                       "projector must be \"shared\" or \"per_hop\", got \"diagonal\""));
  c = gt::hop_field_encoder_config(4, 2, "as_is", "per_hop");
  EXPECT_EQ(c.problem(), "");
  c.gnn_output = 7;
  EXPECT_TRUE(contains(c.problem(), "gnn_output is all its hops' widths + its 3 hops (15), got 7"));
}

TEST(HopFieldEncoder, ItsFileReadsBackAsHopField) {
  TempDir dir;
  const std::string path = dir.path + "/enc.safetensors";
  gt::GraphEncoder(gt::hop_field_encoder_config(6, 2))->save_safetensors(path);
  const auto meta = gt::SafetensorsFile::open(path).metadata();
  EXPECT_EQ(meta.at("graph_encoder_type"), "hop_field");
  EXPECT_EQ(meta.at("gnn_input"), "18");
  EXPECT_EQ(meta.at("hop_field_hops"), "2");
  gt::GraphEncoder back = gt::open_graph_encoder(path, "");
  ASSERT_TRUE(back->config().is_hop_field());
  EXPECT_EQ(back->config().gnn_input, 18);
  EXPECT_EQ(back->config().gnn_output, 9);
  EXPECT_EQ(back->config().field_hops, 2);
  EXPECT_EQ(meta.at("hop_field_rows"), "as_is");
  EXPECT_EQ(back->config().field_rows, "as_is");
  const std::string l1 = dir.path + "/l1.safetensors";
  gt::GraphEncoder(gt::hop_field_encoder_config(6, 2, "l1"))->save_safetensors(l1);
  EXPECT_EQ(gt::open_graph_encoder(l1, "")->config().field_rows, "l1");
  EXPECT_EQ(meta.at("hop_field_projector"), "shared");
  const std::string per_hop = dir.path + "/per_hop.safetensors";
  gt::GraphEncoder(gt::hop_field_encoder_config(6, 2, "l2", "per_hop"))->save_safetensors(per_hop);
  EXPECT_EQ(gt::SafetensorsFile::open(per_hop).metadata().at("hop_field_projector"), "per_hop");
  const gt::GraphEncoderConfig per_hop_back = gt::open_graph_encoder(per_hop, "")->config();
  EXPECT_EQ(per_hop_back.field_projector, "per_hop");
  EXPECT_EQ(per_hop_back.field_rows, "l2");
  EXPECT_EQ(per_hop_back.gnn_output, 18 + 3);
  // A file written before rows were a choice has no such key: its rows were as they are.
  const std::string older = dir.path + "/older.safetensors";
  gt::save_safetensors(older, {{"hop_embedding", torch::eye(3)}},
                       {{"graph_encoder_type", "hop_field"}, {"gnn_input", "18"}, {"hop_field_hops", "2"}});
  EXPECT_EQ(gt::open_graph_encoder(older, "")->config().field_rows, "as_is");
  EXPECT_EQ(gt::open_graph_encoder(older, "")->config().field_projector, "shared");
  const std::string other = dir.path + "/other.safetensors";
  gt::save_safetensors(other, {{"hop_embedding", torch::eye(3)}},
                       {{"graph_encoder_type", "hop_field"}, {"gnn_input", "18"}, {"hop_field_hops", "2"}, {"hop_field_rows", "l3"}});
  EXPECT_TRUE(contains(input_error_of([&] { gt::open_graph_encoder(other, ""); }), "rows must be \"as_is\", \"l1\" or \"l2\", got \"l3\""));

  const std::string bare = dir.path + "/bare.safetensors";
  gt::save_safetensors(bare, {{"hop_embedding", torch::eye(3)}}, {});
  EXPECT_TRUE(contains(input_error_of([&] { gt::open_graph_encoder(bare, ""); }), "without graphtune's metadata"));
  const std::string odd = dir.path + "/odd.safetensors";
  gt::save_safetensors(odd, {{"hop_embedding", torch::eye(3)}},
                       {{"graph_encoder_type", "hop_field"}, {"gnn_input", "19"}, {"hop_field_hops", "2"}});
  EXPECT_TRUE(contains(input_error_of([&] { gt::open_graph_encoder(odd, ""); }), "19 is not a multiple of 3"));
}

}  // namespace
