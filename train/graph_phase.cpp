#include "train/graph_phase.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "common/error.hpp"
#include "data/instructions.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "parallel/tensor_parallel.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "train/rank_report.hpp"
#include "train/step_runner.hpp"
#include "train/train_checkpoint.hpp"
#include "train/train_loop.hpp"
#include "weights/hf_folder.hpp"

namespace gt {

namespace {

// Parameters per decoder layer, and those stage 0 and the last stage hold besides: what the
// balanced partition weighs.
struct StageWeights {
  std::vector<int64_t> layers;
  int64_t first = 0, last = 0;
};

StageWeights graphgpt_stage_weights(GraphGpt& model) {
  const auto& mc = model->llm->config();
  StageWeights w;
  w.layers.assign(static_cast<size_t>(mc.n_layers), 0);
  for (auto& [name, p] : model->llm->named_weights()) {
    const int64_t l = LlamaImpl::layer_of(name);
    if (l >= 0) w.layers[static_cast<size_t>(l)] += p.numel();
    else if (name == "model.embed_tokens.weight") w.first += p.numel();
    else w.last += p.numel();
  }
  if (mc.tie_embeddings) w.last += mc.vocab_size * mc.dim;  // the head's copy of the table
  for (auto& p : model->encoder->parameters()) w.first += p.numel();
  for (auto& p : model->projector->parameters()) w.first += p.numel();
  return w;
}

// Names and global shapes of everything a checkpoint of a graph stage may hold.
std::map<std::string, std::vector<int64_t>> checkpointed_shapes(GraphGpt& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, p] : model->llm->named_weights()) shapes[name] = p.sizes().vec();
  for (auto& [name, p] : model->encoder->named_weights()) shapes["model.graph_tower." + name] = p.sizes().vec();
  for (auto& [name, p] : model->projector->named_weights()) shapes[name] = p.sizes().vec();
  shapes[kGraphTokenRowsName] = model->graph_token_rows().sizes().vec();
  return shapes;
}

// What this rank holds, for its checkpoints: stage 0 the projector (its slice under tensor
// parallelism), the <g_start>/<g_end> rows and the encoder; every stage its LLM layers (frozen).
std::vector<CheckpointedTensor> checkpointed_tensors(GraphGpt& model, const ParallelRuntime& rt, const TrainConfig& cfg,
                                                     ColumnParallelLinear* tp_projector) {
  std::vector<CheckpointedTensor> held;
  if (rt.first_stage()) {
    const int split = tp_projector ? 0 : -1;  // column-parallel: the output rows of weight and bias
    for (auto& [name, p] : model->projector->named_weights()) {
      const bool weight = p.dim() == 2;
      torch::Tensor mine = !tp_projector ? p : weight ? tp_projector->weight() : tp_projector->bias();
      held.push_back({name, mine, split, true});
    }
    held.push_back({kGraphTokenRowsName, model->graph_token_rows(), -1, cfg.trainable == "graphgpt"});
    for (auto& [name, p] : model->encoder->named_weights()) held.push_back({"model.graph_tower." + name, p, -1, false});
  }
  for (auto& [name, p] : model->llm->named_weights()) {
    if (p.numel() == 0) continue;  // another stage's
    // The last stage's copy of tied embeddings is the first stage's: saved there.
    const bool copy = name == "model.embed_tokens.weight" && !rt.first_stage();
    held.push_back({name, p, -1, false, !copy});
  }
  return held;
}

}  // namespace

int run_graph_stage(const TrainConfig& cfg, const World& world) {
  auto t0 = std::chrono::steady_clock::now();
  // Every record is read and validated before any weight is: a bad record costs nothing.
  std::vector<InstructionRecord> read = read_job_records(cfg);
  GraphGptSetup s = build_graphgpt(cfg);
  GraphGpt& model = s.model;
  // All records are checked against the feature tables before training starts, not when a
  // background worker first meets a bad one.
  check_records_against_features(read, s.features, cfg);
  auto records = std::make_shared<const std::vector<InstructionRecord>>(std::move(read));

  const StageWeights sw = graphgpt_stage_weights(model);
  const std::string fingerprint = model_fingerprint(checkpointed_shapes(model));
  ParallelRuntime rt = make_parallel_runtime(cfg, world, sw.layers, sw.first, sw.last);
  model->llm->keep_only(rt.first_layer, rt.last_layer, rt.first_stage(), rt.last_stage());

  // This rank's share of every global batch: replica dp of dp, in m pipeline micro-batches.
  const int64_t m = cfg.microbatches, chunks = cfg.grad_accum_steps;
  GraphBatchOptions bo;
  bo.max_len = cfg.max_len;
  bo.batch_size = cfg.batch_size;
  bo.seed = static_cast<uint64_t>(cfg.seed);
  bo.num_workers = static_cast<int32_t>(cfg.num_workers);
  bo.where = cfg.instructions;
  bo.chat_template = chat_template_named(cfg.chat_template, cfg.path + ": [data].template");
  bo.drop_last = true;
  bo.shards = rt.shape.dp * m;
  bo.first_shard = rt.coord.dp * m;
  bo.shards_here = m;
  const int64_t steps =
      cfg.steps > 0 ? cfg.steps
                    : std::max<int64_t>(1, cfg.epochs * GraphBatchStream::epoch_steps(static_cast<int64_t>(records->size()), bo) / chunks);

  model->train();
  model->encoder->eval();  // frozen: no dropout
  model->llm->set_activation_checkpointing(cfg.activation_checkpointing);
  if (cfg.trainable != "graphgpt") model->graph_token_rows().set_requires_grad(false);
  // Tensor parallelism splits the projector by output columns; each shard rank trains its slice.
  std::unique_ptr<ColumnParallelLinear> tp_projector;
  if (rt.shape.tp > 1) {
    tp_projector = std::make_unique<ColumnParallelLinear>(model->projector->weight().detach(),
                                                          model->projector->bias().detach(), *rt.tp);
    model->use_projection([&](const torch::Tensor& nodes) { return tp_projector->forward(nodes); });
  }
  // The projector and token rows live on stage 0; later stages train nothing of their own.
  std::vector<torch::Tensor> decay, no_decay;
  StepParams sp;
  if (rt.first_stage()) {
    torch::Tensor w = tp_projector ? tp_projector->weight() : model->projector->weight();
    torch::Tensor b = tp_projector ? tp_projector->bias() : model->projector->bias();
    decay = {w};
    no_decay = {b};
    if (cfg.trainable == "graphgpt") no_decay.push_back(model->graph_token_rows());
    if (tp_projector) sp.tp_sharded = {w, b};
  }
  sp.trainable = decay;
  sp.trainable.insert(sp.trainable.end(), no_decay.begin(), no_decay.end());

  TrainCheckpoint checkpoint(rt, cfg, steps, checkpointed_tensors(model, rt, cfg, tp_projector.get()), fingerprint);
  checkpoint.add_file_contents("config.json", llama_config_json(model->llm->config()));
  const int64_t first_step = checkpoint.resume();
  // A resumed run's stream starts where step first_step reads: each step takes chunks x m parts.
  bo.first_element = first_step * chunks * m;
  GraphBatchStream stream(records, s.features, *s.tokenizer, bo);

  int64_t trainable = 0;
  for (auto& p : model->trainable_parameters()) trainable += p.numel();
  if (rt.reports()) {
    std::fprintf(stderr,
                 "graphtune: stage %s: %zu records, %lld steps (batch %lld x accumulation %lld), LLM %s frozen, "
                 "%lld trainable parameters (%s)\n",
                 cfg.stage.c_str(), records->size(), static_cast<long long>(steps),
                 static_cast<long long>(cfg.batch_size), static_cast<long long>(chunks), cfg.model_path.c_str(),
                 static_cast<long long>(trainable), cfg.trainable.c_str());
    // Frozen LLM and encoder are bf16 already (build_graphgpt); the projector and rows stay fp32.
    std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.dtype, frozen_bytes(*model)).c_str());
  }
  report_layout(rt, cfg);

  const bool bf16 = is_bf16(cfg.dtype);
  const auto device = model->projector->weight().device().type();
  std::vector<GraphGptBatch> batches;  // this rank's micro-batches of the current step
  StageModel stage;
  stage.load = [&](int64_t) {
    batches.clear();
    int64_t learned = 0, tokens = 0;
    for (int64_t i = 0; i < chunks * m; ++i) {
      batches.push_back(stream.next());
      learned += learned_positions(batches.back().labels);
      tokens += batches.back().num_tokens();
    }
    return std::make_pair(learned, tokens);
  };
  stage.forward = [&](int64_t k, int64_t j, const torch::Tensor& input) {
    const GraphGptBatch& b = batches[static_cast<size_t>(k * m + j)];
    torch::Tensor x;
    {
      AutocastScope autocast(bf16, device);  // bf16 matmuls; the logits come out fp32
      x = rt.first_stage() ? model->embed(b) : input;
      x = model->llm->forward_layers(x, b.attention_mask, rt.first_layer, rt.last_layer);
      if (!rt.last_stage()) return x;
      return model->llm->head_loss_sum(x, b.labels);  // the logits come out fp32
    }
  };
  StepRunner runner(rt, cfg, sp);
  TrainLogFile log_file(rt.reports() ? cfg.out_dir : "", first_step);
  run_train_loop(
      decay, no_decay, cfg, steps, [&](int64_t step) { return runner.run(step, stage); },
      [&] { return runner.grad_norm(); },
      [&](const StepLog& l) {
        log_file.write(l);
        if (!rt.reports()) return;
        std::fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | data wait %.2f s%s\n",
                     static_cast<long long>(l.step), static_cast<long long>(steps), l.loss, l.lr, l.grad_norm,
                     l.tokens_per_s, stream.wait_seconds(), skipped_note(l).c_str());
      },
      checkpoint.hooks());
  report_rank_peak(rt, runner);

  // The outputs are whole tensors: shards come back together on the tp ranks of stage 0 of
  // replica 0 (a collective among them), and world rank 0 writes.
  if (tp_projector && rt.first_stage() && rt.coord.dp == 0) {
    auto w = tp_projector->full_weight(), b = tp_projector->full_bias();
    torch::NoGradGuard ng;
    model->projector->weight().copy_(w);
    model->projector->bias().copy_(b);
  }
  if (rt.reports()) {
    save_graph_stage_outputs(model, cfg.out_dir);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "graphtune: stage %s done in %.1f s (data wait %.2f s over %lld batches); wrote %s/graph_projector.bin\n",
                 cfg.stage.c_str(), secs, stream.wait_seconds(), static_cast<long long>(stream.batches()),
                 cfg.out_dir.c_str());
  }
  rt.world->barrier();  // nobody exits (finalising MPI) while rank 0 still writes
  return 0;
}

}  // namespace gt
