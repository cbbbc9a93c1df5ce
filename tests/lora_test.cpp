// LoRA adapters (model/lora.hpp) and their PEFT folder (model/peft_adapter.hpp): a fresh adapter
// changes nothing; a trained one equals merging W + (alpha / r) B A into the weights; a stage's
// adapters are the same as one process's for those layers; gradients reach A and B only; the
// folder round-trips and refuses what graphtune does not run, in one line.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <memory>
#include <string>

#include "common/atomic_file.hpp"
#include "model/lora.hpp"
#include "model/peft_adapter.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_models.hpp"

namespace {

using gt::LoraTarget;
using gt::test::input_error_of;

gt::LoraSettings all_targets() {
  gt::LoraSettings s;
  s.rank = 4;
  s.alpha = 8;
  s.targets = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kV, LoraTarget::kO,
               LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};
  return s;
}

torch::Tensor tokens() { return torch::tensor({{1, 5, 9, 13, 17, 21, 2, 3}}, torch::kInt64); }

TEST(Lora, FreshAdapterChangesNothingTrainedOneEqualsMergedWeights) {
  torch::NoGradGuard ng;
  auto base = gt::test::tiny_llama(40, 3);
  const auto want = base->forward(tokens());
  auto lora = std::make_shared<gt::LoraAdapters>(all_targets(), base->config(), 0, 2, torch::kCPU, 7);
  base->set_lora(lora);
  EXPECT_TRUE(torch::equal(base->forward(tokens()), want));  // B starts at zero

  for (auto& [name, p] : lora->named_weights())
    if (name.find("lora_B") != std::string::npos) p.normal_(0.0, 0.05);
  const auto adapted = base->forward(tokens());
  EXPECT_GT((adapted - want).abs().max().item<double>(), 1e-3);

  // The same model with each target's weight merged: W + scale B A.
  auto merged = gt::test::tiny_llama(40, 3);
  std::map<std::string, torch::Tensor> a;
  for (auto& [name, p] : lora->named_weights()) a[name] = p;
  for (auto& [name, w] : merged->named_weights()) {
    const auto dot = name.rfind(".weight");
    const std::string stem = name.substr(0, dot);
    if (!a.count(stem + ".lora_A.weight")) continue;
    w.add_(torch::matmul(a.at(stem + ".lora_B.weight"), a.at(stem + ".lora_A.weight")) * all_targets().scale());
  }
  EXPECT_TRUE(torch::allclose(adapted, merged->forward(tokens()), 1e-4, 1e-5));
}

TEST(Lora, StageAdaptersEqualOneProcesssForTheirLayers) {
  auto cfg = gt::test::tiny_llama()->config();
  cfg.n_layers = 4;
  gt::LoraAdapters whole(all_targets(), cfg, 0, 4, torch::kCPU, 11), tail(all_targets(), cfg, 2, 4, torch::kCPU, 11);
  std::map<std::string, torch::Tensor> w;
  for (auto& [name, p] : whole.named_weights()) w[name] = p;
  const auto mine = tail.named_weights();
  ASSERT_EQ(mine.size(), 2u * 7u * 2u);
  for (auto& [name, p] : mine) EXPECT_TRUE(torch::equal(p, w.at(name))) << name;
  EXPECT_EQ(gt::LoraAdapters::shapes(all_targets(), cfg).size(), 4u * 7u * 2u);
  EXPECT_EQ(gt::LoraAdapters::shapes(all_targets(), cfg).at("model.layers.3.mlp.down_proj.lora_A.weight"),
            (std::vector<int64_t>{4, cfg.hidden_dim}));
  gt::LoraAdapters other(all_targets(), cfg, 0, 4, torch::kCPU, 12);
  EXPECT_FALSE(torch::equal(other.named_weights()[0].second, whole.named_weights()[0].second));
}

TEST(Lora, GradientsReachTheAdaptersOnly) {
  auto llm = gt::test::tiny_llama(40, 3);
  for (auto& [n, p] : llm->named_weights()) p.set_requires_grad(false);
  gt::LoraSettings s;  // q_proj, v_proj, rank 8
  auto lora = std::make_shared<gt::LoraAdapters>(s, llm->config(), 0, 2, torch::kCPU, 1);
  llm->set_lora(lora);
  auto logits = llm->forward(tokens());
  gt::causal_lm_loss(logits, tokens()).backward();
  for (auto& [name, p] : lora->named_weights()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    // B = 0 at the start: A's gradient is zero, B's is not.
    if (name.find("lora_A") != std::string::npos) EXPECT_EQ(p.grad().abs().max().item<double>(), 0.0) << name;
    else EXPECT_GT(p.grad().abs().max().item<double>(), 0.0) << name;
  }
}

TEST(PeftAdapter, RoundTripAndRefusals) {
  gt::test::TempDir dir;
  auto cfg = gt::test::tiny_llama()->config();
  gt::LoraAdapters lora(all_targets(), cfg, 0, 2, torch::kCPU, 5);
  gt::save_peft_adapter(dir.path + "/a", all_targets(), "base", lora.named_weights());
  const gt::PeftAdapter back = gt::read_peft_adapter(dir.path + "/a");
  EXPECT_EQ(back.settings.rank, 4);
  EXPECT_EQ(back.settings.alpha, 8.0);
  EXPECT_EQ(back.settings.targets, all_targets().targets);
  ASSERT_EQ(back.weights.size(), lora.named_weights().size());
  for (auto& [name, p] : lora.named_weights()) EXPECT_TRUE(torch::equal(back.weights.at(name), p)) << name;

  const std::string config = dir.path + "/a/adapter_config.json";
  const std::string good = gt::read_file(config);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    gt::write_file_atomic(config, text);
    return input_error_of([&] { gt::read_peft_adapter(dir.path + "/a"); });
  };
  EXPECT_NE(with("\"use_dora\": false", "\"use_dora\": true").find("adapter_config.json: use_dora: not supported yet"),
            std::string::npos);
  EXPECT_NE(with("\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"").find("peft_type: not supported yet: \"IA3\""),
            std::string::npos);
  EXPECT_NE(with("\"bias\": \"none\"", "\"bias\": \"all\"").find("bias: not supported yet"), std::string::npos);
  EXPECT_NE(with("\"r\": 4", "\"r\": 0").find("r: must be an integer in [1, 4096]"), std::string::npos);
  const std::string regex = with("\"target_modules\": [", "\"target_modules\": \".*proj\", \"x\": [");
  EXPECT_NE(regex.find("target_modules: not supported yet: a regular expression"), std::string::npos) << regex;
  const std::string embed = with("\"q_proj\"", "\"embed_tokens\"");
  EXPECT_NE(embed.find("target_modules: 'embed_tokens' is not one of"), std::string::npos) << embed;
}

}  // namespace
