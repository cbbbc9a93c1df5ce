// GraphGPT's graph encoder and projector: checkpoint names and shapes, semantics on small cases
// computed by hand, determinism in eval mode, input errors, and file round trips. The check
// against an independent PyTorch implementation (and the projector .bin against Python's
// torch.load / torch.save) is tests/test_graph_encoder_reference.py with
// tests/graph_encoder_reference_driver.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "model/graph_projector.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace {

using gt::test::input_error_of;
using gt::test::TempDir;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

torch::Tensor small_edges() {
  // node 3 receives nothing; 1 has a self-loop; (0, 2) twice.
  return torch::tensor({0, 0, 0, 1, 2, 1, 4, 4, 0, 2, 2, 1, 0, 3, 1, 4}, torch::kInt64).view({2, 8});
}

TEST(GraphEncoder, CheckpointNamesAndShapes) {
  gt::GraphEncoder enc;
  std::map<std::string, std::vector<int64_t>> want = {
      {"W_pos", {1, 128}}, {"W_P.weight", {128, 128}}, {"W_P.bias", {128}},
      {"inverW_P.weight", {128, 128}}, {"inverW_P.bias", {128}}};
  for (int i = 0; i < 3; ++i) {
    const std::string p = "gtLayers." + std::to_string(i) + ".";
    for (const char* m : {"qTrans", "kTrans", "vTrans"}) want[p + m] = {128, 128};
    want[p + "norm.weight"] = {128};
    want[p + "norm.bias"] = {128};
  }
  auto named = enc->named_weights();
  ASSERT_EQ(named.size(), want.size());
  for (const auto& [name, t] : named) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_EQ(t.sizes().vec(), want[name]) << name;
  }
  gt::GraphEncoderConfig no_norm;
  no_norm.att_norm = false;
  no_norm.gt_layers = 2;
  EXPECT_EQ(gt::GraphEncoder(no_norm)->named_weights().size(), 2u + 1u + 2u * 3u + 2u);
}

TEST(GraphEncoder, OutputShapeAndEvalDeterminism) {
  gt::GraphEncoder enc;
  enc->init_weights(3);
  enc->eval();
  auto x = torch::randn({5, 128});
  auto a = enc->forward(x, small_edges());
  auto b = enc->forward(x, small_edges());
  EXPECT_EQ(a.sizes(), (torch::IntArrayRef{5, 128}));
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::isfinite(a).all().item<bool>());
  // int32 edge indices give the same result.
  EXPECT_TRUE(torch::equal(a, enc->forward(x, small_edges().to(torch::kInt32))));
  // Training mode applies dropout 0.1 after W_P: the output changes.
  enc->train();
  EXPECT_FALSE(torch::equal(a, enc->forward(x, small_edges())));
}

// A seeded mask is the seed's alone: the same output for the same seed, another for another seed,
// each kept value scaled by 1 / (1 - p), and nothing dropped in eval mode or at p = 0.
TEST(GraphEncoder, SeededDropout) {
  gt::GraphEncoder enc;
  enc->init_weights(2);
  auto x = torch::randn({5, 128}, torch::TensorOptions().dtype(torch::kFloat32));
  enc->eval();
  const auto plain = enc->forward(x, small_edges());
  enc->train();
  const auto a = enc->forward(x, small_edges(), false, 7);
  EXPECT_TRUE(torch::equal(a, enc->forward(x, small_edges(), false, 7)));
  EXPECT_FALSE(torch::equal(a, enc->forward(x, small_edges(), false, 8)));
  EXPECT_FALSE(torch::allclose(a, plain));
  // With no layers and an identity inverW_P, the output is dropout(W_P x) itself.
  gt::GraphEncoderConfig flat;
  flat.gt_layers = 0;
  gt::GraphEncoder lin(flat);
  lin->init_weights(3);
  auto params = lin->named_parameters();
  {
    torch::NoGradGuard ng;
    params["inverW_P.weight"].copy_(torch::eye(128));
    params["inverW_P.bias"].zero_();
  }
  lin->set_dropout(0.5);
  lin->train();
  torch::NoGradGuard ng;
  const auto full = torch::linear(x, params["W_P.weight"], params["W_P.bias"]);
  const auto out = lin->forward(x, small_edges(), false, 11);
  const auto kept = out.ne(0);
  EXPECT_TRUE(torch::allclose(out.masked_select(kept), 2 * full.masked_select(kept), 1e-5, 1e-6));
  const double share = kept.to(torch::kFloat32).mean().item<double>();
  EXPECT_GT(share, 0.4);
  EXPECT_LT(share, 0.6);
  lin->set_dropout(0.0);
  EXPECT_TRUE(torch::allclose(lin->forward(x, small_edges(), false, 11), full, 1e-5, 1e-6));
  enc->eval();
  EXPECT_TRUE(torch::equal(plain, enc->forward(x, small_edges(), false, 7)));
  EXPECT_EQ(input_error_of([&] { enc->set_dropout(1.0, "job.toml: [model].encoder_dropout"); }),
            "job.toml: [model].encoder_dropout: must be in [0, 1), got 1");
  EXPECT_THROW(enc->set_dropout(-0.1), gt::InputError);
}

TEST(GraphEncoder, DifferentInitSeedsDiffer) {
  gt::GraphEncoder a, b;
  a->init_weights(1);
  b->init_weights(1);
  for (size_t i = 0; i < a->named_weights().size(); ++i)
    EXPECT_TRUE(torch::equal(a->named_weights()[i].second, b->named_weights()[i].second));
  b->init_weights(2);
  EXPECT_FALSE(torch::equal(a->named_weights()[1].second, b->named_weights()[1].second));
}

// With no edges every layer is z <- LayerNorm(z): a closed form to compare against.
TEST(GraphEncoder, NoEdgesIsLayerNormStack) {
  gt::GraphEncoder enc;
  enc->init_weights(5);
  enc->eval();
  torch::NoGradGuard ng;
  auto w = enc->named_weights();
  std::map<std::string, torch::Tensor> m(w.begin(), w.end());
  auto x = torch::randn({4, 128});
  auto z = torch::linear(x, m["W_P.weight"], m["W_P.bias"]);
  for (int i = 0; i < 3; ++i) {
    const std::string p = "gtLayers." + std::to_string(i) + ".norm.";
    z = torch::layer_norm(z, {128}, m[p + "weight"], m[p + "bias"], 1e-6);
  }
  auto want = torch::linear(z, m["inverW_P.weight"], m["inverW_P.bias"]);
  auto got = enc->forward(x, torch::zeros({2, 0}, torch::kInt64));
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-6);
}

// One edge (0 <- 1) and one head: node 0 gets exactly v(z1) (weight exp(a)/exp(a) = 1), node 1
// gets nothing. Checks the q-from-row, k/v-from-column orientation and x @ M products.
TEST(GraphEncoder, SingleEdgeMessage) {
  gt::GraphEncoderConfig cfg;
  cfg.gnn_input = 4;
  cfg.att_d_model = 4;
  cfg.gnn_output = 4;
  cfg.gt_layers = 1;
  cfg.head = 1;
  cfg.att_norm = false;
  gt::GraphEncoder enc(cfg);
  enc->init_weights(9);
  enc->eval();
  torch::NoGradGuard ng;
  auto w = enc->named_weights();
  std::map<std::string, torch::Tensor> m(w.begin(), w.end());
  auto x = torch::randn({2, 4});
  auto z = torch::linear(x, m["W_P.weight"], m["W_P.bias"]);
  auto msg0 = torch::matmul(z[1], m["gtLayers.0.vTrans"]);
  auto want = torch::stack({z[0] + msg0, z[1]});
  want = torch::linear(want, m["inverW_P.weight"], m["inverW_P.bias"]);
  auto got = enc->forward(x, torch::tensor({0, 1}, torch::kInt64).view({2, 1}));
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-5);
}

TEST(GraphEncoder, BadInputs) {
  gt::GraphEncoder enc;
  enc->eval();
  std::string e = input_error_of([&] { enc->forward(torch::randn({5, 64}), small_edges()); });
  EXPECT_TRUE(contains(e, "width 64")) << e;
  EXPECT_TRUE(contains(e, "gnn_input=128")) << e;
  e = input_error_of([&] { enc->forward(torch::randn({3, 128}), small_edges()); });  // node 4 of 3
  EXPECT_TRUE(contains(e, "edge_index")) << e;
  EXPECT_TRUE(contains(e, "node 4")) << e;
  EXPECT_TRUE(contains(e, "[0, 3)")) << e;
  e = input_error_of([&] { enc->forward(torch::randn({5, 128}), torch::tensor({0, -1}).view({2, 1})); });
  EXPECT_TRUE(contains(e, "node -1")) << e;
  e = input_error_of([&] { enc->forward(torch::randn({5, 128}), torch::zeros({3, 2}, torch::kInt64)); });
  EXPECT_TRUE(contains(e, "[2, E]")) << e;
  e = input_error_of([&] { enc->forward(torch::randn({5, 128}), torch::zeros({2, 2})); });
  EXPECT_TRUE(contains(e, "integers")) << e;
  e = input_error_of([&] { enc->forward(torch::randn({128}), small_edges()); });
  EXPECT_TRUE(contains(e, "[N, 128]")) << e;
  gt::GraphEncoderConfig bad;
  bad.head = 7;
  e = input_error_of([&] { gt::GraphEncoder{bad}; });
  EXPECT_TRUE(contains(e, "head (7)")) << e;
}

TEST(GraphEncoder, LoadWeightsChecksNamesAndShapes) {
  gt::GraphEncoder src, dst;
  src->init_weights(11);
  auto named = src->named_weights();
  std::map<std::string, torch::Tensor> m(named.begin(), named.end());

  auto missing = m;
  missing.erase("gtLayers.1.kTrans");
  std::string e = input_error_of([&] { dst->load_weights(missing, "ckpt.pkl"); });
  EXPECT_TRUE(contains(e, "ckpt.pkl") && contains(e, "missing tensor 'gtLayers.1.kTrans'")) << e;

  auto extra = m;
  extra["gtLayers.3.qTrans"] = torch::zeros({128, 128});
  e = input_error_of([&] { dst->load_weights(extra, "ckpt.pkl"); });
  EXPECT_TRUE(contains(e, "unexpected tensor 'gtLayers.3.qTrans'")) << e;

  auto wrong = m;
  wrong["W_P.weight"] = torch::zeros({128, 384});
  e = input_error_of([&] { dst->load_weights(wrong, "ckpt.pkl"); });
  EXPECT_TRUE(contains(e, "'W_P.weight' has shape [128, 384]") && contains(e, "[128, 128]")) << e;

  // A CLIP-style state dict: the encoder under "gnn.", other tensors beside it.
  std::map<std::string, torch::Tensor> clip = {{"logit_scale", torch::ones({})},
                                               {"transformer.x.weight", torch::zeros({3})}};
  for (const auto& [k, v] : m) clip["gnn." + k] = v.to(torch::kFloat16).to(torch::kFloat32);
  dst->load_weights(clip, "clip.pkl", "gnn.");
  for (const auto& [k, v] : dst->named_weights())
    EXPECT_TRUE(torch::equal(v, clip["gnn." + k])) << k;
  clip.erase("gnn.inverW_P.bias");
  e = input_error_of([&] { dst->load_weights(clip, "clip.pkl", "gnn."); });
  EXPECT_TRUE(contains(e, "missing tensor 'gnn.inverW_P.bias'")) << e;
}

TEST(GraphEncoder, SafetensorsAndPickleRoundTrip) {
  TempDir dir;
  gt::GraphEncoder src, a, b;
  src->init_weights(21);
  src->save_safetensors(dir.file("enc.safetensors"));
  a->load_file(dir.file("enc.safetensors"));
  gt::save_torch_state_dict(dir.file("enc.pkl"), src->named_weights());
  b->load_file(dir.file("enc.pkl"));
  for (size_t i = 0; i < src->named_weights().size(); ++i) {
    EXPECT_TRUE(torch::equal(src->named_weights()[i].second, a->named_weights()[i].second));
    EXPECT_TRUE(torch::equal(src->named_weights()[i].second, b->named_weights()[i].second));
  }
  std::string e = input_error_of([&] { a->load_file(dir.write("junk.pkl", "not a pickle")); });
  EXPECT_TRUE(contains(e, "junk.pkl")) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(GraphEncoder, GraphGptTowerFolderReadsBack) {
  TempDir dir;
  for (const char* type : {"gt", "gcn"}) {
    gt::GraphEncoderConfig c;
    c.gnn_type = type;
    c.gnn_input = 12, c.gnn_hid = 10, c.att_d_model = 16, c.gnn_output = 8, c.gt_layers = 2, c.head = 4;
    gt::GraphEncoder enc(c);
    enc->init_weights(5);
    const std::string folder = gt::write_graphgpt_graph_tower(*enc, dir.file(std::string("towers_") + type));
    EXPECT_TRUE(contains(folder, std::string(type) == "gt" ? "/clip_gt_arxiv_pub" : "/clip_gcn_arxiv")) << folder;
    gt::GraphEncoder back = gt::open_graph_encoder(folder, "");
    EXPECT_EQ(back->config().gnn_type, type);
    ASSERT_EQ(back->named_weights().size(), enc->named_weights().size());
    for (size_t i = 0; i < enc->named_weights().size(); ++i)
      EXPECT_TRUE(torch::equal(back->named_weights()[i].second, enc->named_weights()[i].second))
          << enc->named_weights()[i].first;
  }
  std::string e = input_error_of([&] {
    gt::write_graphgpt_graph_tower(*gt::GraphEncoder(gt::llaga_encoder_config(4, 1, 2)), dir.file("x"));
  });
  EXPECT_TRUE(contains(e, "not one of GraphGPT's graph towers")) << e;
}

TEST(GraphProjector, ForwardAndFiles) {
  TempDir dir;
  gt::GraphProjector p(128, 64);
  p->init_weights(4);
  auto h = torch::randn({7, 128});
  auto y = p->forward(h);
  EXPECT_EQ(y.sizes(), (torch::IntArrayRef{7, 64}));
  EXPECT_LT((y - (torch::matmul(h, p->weight().t()) + p->bias())).abs().max().item<double>(), 1e-5);
  std::string e = input_error_of([&] { p->forward(torch::randn({7, 100})); });
  EXPECT_TRUE(contains(e, "width 128")) << e;

  gt::save_graph_projector_bin(dir.file("graph_projector.bin"), p);
  auto q = gt::load_graph_projector_bin(dir.file("graph_projector.bin"));
  EXPECT_EQ(q->graph_hidden(), 128);
  EXPECT_EQ(q->llm_dim(), 64);
  EXPECT_TRUE(torch::equal(q->weight(), p->weight()));
  EXPECT_TRUE(torch::equal(q->bias(), p->bias()));
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"graph_projector.bin"}));  // no temporary left

  gt::save_graph_projector_safetensors(dir.file("p.safetensors"), p);
  auto st = gt::load_safetensors(dir.file("p.safetensors"));
  EXPECT_EQ(st.size(), 2u);
  EXPECT_TRUE(torch::equal(st.at(gt::kGraphProjectorWeight), p->weight()));
  auto r = gt::load_graph_projector_safetensors(dir.file("p.safetensors"));
  EXPECT_TRUE(torch::equal(r->bias(), p->bias()));

  gt::save_torch_state_dict(dir.file("bad.bin"), {{"model.graph_projector.weight", p->weight()},
                                                  {"model.mm_projector.bias", p->bias()}});
  e = input_error_of([&] { gt::load_graph_projector_bin(dir.file("bad.bin")); });
  EXPECT_TRUE(contains(e, "bad.bin") && contains(e, "unexpected tensor 'model.mm_projector.bias'")) << e;
  gt::save_torch_state_dict(dir.file("bad2.bin"), {{gt::kGraphProjectorWeight, p->weight()},
                                                   {gt::kGraphProjectorBias, torch::zeros({65})}});
  e = input_error_of([&] { gt::load_graph_projector_bin(dir.file("bad2.bin")); });
  EXPECT_TRUE(contains(e, "'model.graph_projector.bias' has shape [65]")) << e;

  // The <g_start>/<g_end> rows travel as model.embed_tokens.weight: [2, D] as graphtune writes
  // it, or GraphGPT's whole [V, D] table, whose last two rows they are.
  const auto rows = torch::randn({2, 64});
  gt::save_graph_projector_bin(dir.file("with_rows.bin"), p, rows);
  gt::GraphProjectorFile f = gt::read_graph_projector_bin(dir.file("with_rows.bin"));
  EXPECT_TRUE(torch::equal(f.token_rows, rows));
  EXPECT_TRUE(torch::equal(f.projector->weight(), p->weight()));
  EXPECT_FALSE(gt::read_graph_projector_bin(dir.file("graph_projector.bin")).token_rows.defined());
  const auto table = torch::randn({9, 64}).to(torch::kFloat16);
  gt::save_torch_state_dict(dir.file("graphgpt.bin"), {{gt::kGraphEmbedTokens, table},
                                                       {gt::kGraphProjectorWeight, p->weight()},
                                                       {gt::kGraphProjectorBias, p->bias()}});
  f = gt::read_graph_projector_bin(dir.file("graphgpt.bin"));
  EXPECT_TRUE(torch::equal(f.token_rows, table.narrow(0, 7, 2).to(torch::kFloat32)));
  gt::save_torch_state_dict(dir.file("bad3.bin"), {{gt::kGraphEmbedTokens, torch::zeros({9, 63})},
                                                   {gt::kGraphProjectorWeight, p->weight()},
                                                   {gt::kGraphProjectorBias, p->bias()}});
  e = input_error_of([&] { gt::read_graph_projector_bin(dir.file("bad3.bin")); });
  EXPECT_TRUE(contains(e, "bad3.bin") && contains(e, "'model.embed_tokens.weight' has shape [9, 63], expected [V, 64]")) << e;
}

}  // namespace
