#include "train/graph_phase.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "common/error.hpp"
#include "data/instructions.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "loader/packed_batch.hpp"
#include "loader/token_balance.hpp"
#include "model/peft_adapter.hpp"
#include "parallel/gather_weights.hpp"
#include "parallel/tensor_parallel.hpp"
#include "train/decoder_stage.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "train/rank_report.hpp"
#include "train/train_checkpoint.hpp"
#include "weights/hf_folder.hpp"

namespace gt {

namespace {

// Names and global shapes of everything a checkpoint of a graph phase may hold.
std::map<std::string, std::vector<int64_t>> checkpointed_shapes(GraphGpt& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  shapes = model->llm->weight_shapes();  // the whole LLM's, whatever this stage holds
  for (auto& [name, p] : model->encoder->named_weights()) shapes["model.graph_tower." + name] = p.sizes().vec();
  for (auto& [name, p] : model->projector->named_weights()) shapes[name] = p.sizes().vec();
  shapes[kGraphTokenRowsName] = model->graph_token_rows().sizes().vec();
  if (LoraAdapters* lora = model->llm->lora())
    for (auto& [name, shape] : LoraAdapters::shapes(lora->settings(), model->llm->config())) shapes[name] = shape;
  return shapes;
}

// What this rank holds, for its checkpoints: stage 0 the projector (its slice under tensor
// parallelism), the <g_start>/<g_end> rows and the encoder; every stage its LLM layers (frozen).
std::vector<CheckpointedTensor> checkpointed_tensors(GraphGpt& model, const ParallelRuntime& rt, const JobConfig& cfg,
                                                     ColumnParallelLinear* tp_projector) {
  std::vector<CheckpointedTensor> held;
  if (rt.first_stage()) {
    const int split = tp_projector ? 0 : -1;  // column-parallel: the output rows of weight and bias
    for (auto& [name, p] : model->projector->named_weights()) {
      const bool weight = p.dim() == 2;
      torch::Tensor mine = !tp_projector ? p : weight ? tp_projector->weight() : tp_projector->bias();
      held.push_back({name, mine, split, true});
    }
    held.push_back({kGraphTokenRowsName, model->graph_token_rows(), -1, cfg.training.trains_token_rows()});
    for (auto& [name, p] : model->encoder->named_weights())
      held.push_back({"model.graph_tower." + name, p, -1, cfg.training.trains_encoder()});
  }
  // Every stage its layers' adapters: trained with projector+lora, else [model].adapter's, frozen.
  if (LoraAdapters* lora = model->llm->lora())
    for (auto& [name, p] : lora->named_weights())
      held.push_back({name, p, -1, cfg.training.trains_lora()});
  for (auto& [name, p] : model->llm->named_weights()) {
    if (p.numel() == 0) continue;  // another stage's
    // The last stage's copy of tied embeddings is the first stage's: saved there.
    const bool copy = name == "model.embed_tokens.weight" && !rt.first_stage();
    held.push_back({name, p, -1, false, !copy});
  }
  return held;
}

// This rank's share of every global batch: replica dp of dp, in m pipeline micro-batches.
GraphBatchOptions batch_options(const JobConfig& cfg, const ParallelRuntime& rt) {
  const int64_t m = cfg.parallelism.microbatches;
  GraphBatchOptions bo;
  bo.max_len = cfg.data.max_len;
  bo.batch_size = cfg.training.batch_size;
  bo.seed = static_cast<uint64_t>(cfg.training.seed);
  bo.num_workers = static_cast<int32_t>(cfg.data.num_workers);
  bo.where = cfg.data.instructions;
  bo.chat_template = chat_template_named(cfg.data.chat_template, cfg.where("data", "template"));
  bo.group_by_length = cfg.data.group_by_length;
  bo.drop_last = true;
  bo.shards = rt.shape.dp * m;
  bo.first_shard = rt.coord.dp * m;
  bo.shards_here = m;
  return bo;
}

// [training].steps, or [training].epochs over the records in optimizer steps.
int64_t total_steps(const JobConfig& cfg, int64_t records, const GraphBatchOptions& bo) {
  if (cfg.training.steps > 0) return cfg.training.steps;
  return std::max<int64_t>(1, cfg.training.epochs * GraphBatchStream::epoch_steps(records, bo) /
                                  cfg.training.grad_accum_steps);
}

// The adapters projector+lora trains: [model].adapter's (build_graphgpt applied them; [lora]
// must describe them), or fresh ones on this stage's layers.
void attach_lora(GraphGpt& model, const JobConfig& cfg, const ParallelRuntime& rt, const c10::Device& device) {
  LoraSettings want;
  want.rank = cfg.lora.rank;
  want.alpha = cfg.lora.alpha;
  want.targets.clear();
  for (const auto& t : cfg.lora.targets) want.targets.push_back(lora_target_named(t, cfg.where("lora", "targets")));
  if (LoraAdapters* have = model->llm->lora()) {
    const LoraSettings& s = have->settings();
    if (s.rank != want.rank || s.alpha != want.alpha || s.targets != want.targets)
      fail(cfg.where("lora", ""), "differs from " + cfg.model.adapter + "/adapter_config.json (r " + std::to_string(s.rank) +
                                      ", lora_alpha " + std::to_string(s.alpha) +
                                      "): set [lora] as the adapter has it to train it further");
    return;
  }
  model->llm->set_lora(std::make_shared<LoraAdapters>(want, model->llm->config(), rt.first_layer, rt.last_layer, device,
                                                      static_cast<uint64_t>(cfg.training.seed)));
}

// What this rank trains: the projector (its slice of the output columns under tensor
// parallelism), with trainable = graphgpt the <g_start>/<g_end> rows (both on stage 0), with
// graphgpt+encoder those and the encoder (whole on every tp rank: the projector's input gradient
// is summed over tp), and with projector+lora every stage its layers' adapters.
struct GraphTrainables {
  std::unique_ptr<ColumnParallelLinear> tp_projector;
  TrainedParameters params;
};

GraphTrainables graph_trainables(GraphGpt& model, const JobConfig& cfg, const ParallelRuntime& rt) {
  GraphTrainables t;
  const bool rows = cfg.training.trains_token_rows();
  if (!rows) model->graph_token_rows().set_requires_grad(false);
  if (rt.shape.tp > 1) {
    t.tp_projector = std::make_unique<ColumnParallelLinear>(model->projector->weight().detach(),
                                                            model->projector->bias().detach(), *rt.tp);
    ColumnParallelLinear* tp = t.tp_projector.get();
    model->use_projection([tp](const torch::Tensor& nodes) { return tp->forward(nodes); });
  }
  if (LoraAdapters* lora = model->llm->lora())
    for (auto& [name, p] : lora->named_weights()) {
      const bool trained = cfg.training.trains_lora();
      p.set_requires_grad(trained);
      if (trained) t.params.decay.push_back(p);
    }
  if (!rt.first_stage()) return t;
  torch::Tensor w = t.tp_projector ? t.tp_projector->weight() : model->projector->weight();
  torch::Tensor b = t.tp_projector ? t.tp_projector->bias() : model->projector->bias();
  t.params.decay.push_back(w);
  t.params.no_decay.push_back(b);
  if (rows) t.params.no_decay.push_back(model->graph_token_rows());
  if (t.tp_projector) t.params.tp_sharded = {w, b};
  if (model->encoder_trained())
    t.params.own_groups.push_back(
        {model->encoder->parameters(), cfg.optimizer.encoder_lr, cfg.optimizer.encoder_weight_decay});
  return t;
}

// This rank's records' tokens so far, the positions their padded batches would have, and the
// tokens computed: what packing and the shared prefix save (or, without them, what padding costs).
struct PaddingCount {
  int64_t tokens = 0, padded = 0, computed = 0;
};

// What graph_batches does with each step's micro-batches.
struct BatchShaping {
  bool packing = true;       // records back to back (loader/packed_batch.hpp)
  bool share_prefix = true;  // their shared prompt prefix once
  bool balance = true;       // a chunk's micro-batches regrouped to equal tokens (loader/token_balance.hpp)
};

// This rank's micro-batches of each step, pulled from the stream: chunks x m of them, in order,
// shaped as `shaping` says. Each step's are all copied to the device when the step starts, queued
// ahead of its compute; the padding mask and the labels stay on the host (GraphGptImpl::prepare).
DecoderBatches graph_batches(GraphBatchStream& stream, std::vector<GraphGptBatch>& held, GraphGpt& model,
                             const torch::Device& device, int64_t chunks, int64_t m, BatchShaping shaping,
                             PaddingCount& count) {
  DecoderBatches feed;
  feed.load = [&stream, &held, &model, device, chunks, m, shaping, &count](int64_t) {
    held.clear();
    int64_t learned = 0, tokens = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      std::vector<GraphGptBatch> chunk;
      for (int64_t j = 0; j < m; ++j) {
        chunk.push_back(stream.next());
        count.padded += chunk.back().input_ids.numel();  // as GraphGPT pads what the stream draws
      }
      if (shaping.packing && shaping.balance && m > 1) chunk = balance_by_tokens(chunk);
      for (GraphGptBatch& b : chunk) {
        const int64_t real = b.num_tokens();
        if (shaping.packing) b = pack_batch(b, shaping.share_prefix);
        learned += learned_positions(b.labels);
        tokens += real;
        count.computed += shaping.packing ? b.packed.tokens() : b.input_ids.numel();
        held.push_back(model->prepare(b, device));
      }
    }
    count.tokens += tokens;
    return std::make_pair(learned, tokens);
  };
  feed.micro = [&held, &model, m](int64_t k, int64_t j) {
    const GraphGptBatch& b = held[static_cast<size_t>(k * m + j)];
    return DecoderMicroBatch{[&model, &b] { return model->embed(b); }, b.attention_mask, b.labels, b.packed};
  };
  return feed;
}

void report_start(GraphGpt& model, const JobConfig& cfg, int64_t records, int64_t steps) {
  int64_t trainable = 0;
  for (auto& p : model->trainable_parameters()) trainable += p.numel();
  if (model->encoder_trained())
    for (auto& p : model->encoder->parameters()) trainable += p.numel();
  if (LoraAdapters* lora = model->llm->lora(); lora && cfg.training.trains_lora())
    for (auto& [name, shape] : LoraAdapters::shapes(lora->settings(), model->llm->config()))
      trainable += shape[0] * shape[1];  // every stage's, as the LLM is counted whole
  std::fprintf(stderr,
               "graphtune: stage %s: %lld records, %lld steps (batch %lld x accumulation %lld), LLM %s (%s, %lld "
               "layers) frozen, %lld trainable parameters (%s)\n",
               name_of(cfg.training.stage), static_cast<long long>(records), static_cast<long long>(steps),
               static_cast<long long>(cfg.training.batch_size), static_cast<long long>(cfg.training.grad_accum_steps),
               cfg.model.path.c_str(), family_name(model->llm->config().family),
               static_cast<long long>(model->llm->config().n_layers), static_cast<long long>(trainable),
               name_of(cfg.training.trainable));
  // Frozen LLM and encoder are bf16 already (build_graphgpt); the projector and rows stay fp32.
  std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.model.dtype, frozen_bytes(*model)).c_str());
  if (cfg.model.encoder_dropout > 0)
    std::fprintf(stderr, "graphtune: the frozen graph encoder trains with dropout %g, its masks seeded per graph\n",
                 cfg.model.encoder_dropout);
  if (const std::string note = graphgpt_keys_note(model->llm->config(), cfg.model.path); !note.empty())
    std::fprintf(stderr, "graphtune: %s\n", note.c_str());
}

void report_lengths(const GraphBatchStream& stream) {
  const std::vector<int64_t>& lengths = stream.lengths();
  int64_t sum = 0, longest = 0;
  for (int64_t l : lengths) sum += l, longest = std::max(longest, l);
  std::fprintf(stderr,
               "graphtune: batches grouped by length: %zu record lengths estimated in %.2f s (mean %.0f, longest "
               "%lld tokens)\n",
               lengths.size(), stream.length_seconds(), static_cast<double>(sum) / static_cast<double>(lengths.size()),
               static_cast<long long>(longest));
}

// The outputs are whole tensors: shards come back together on the tp ranks of stage 0 of
// replica 0 (a collective among them), and world rank 0 writes.
void save_outputs(GraphGpt& model, ColumnParallelLinear* tp_projector, const ParallelRuntime& rt, const JobConfig& cfg,
                  const GraphBatchStream& stream, const PaddingCount& count, std::chrono::steady_clock::time_point t0) {
  if (tp_projector && rt.first_stage() && rt.coord.dp == 0) {
    auto w = tp_projector->full_weight(), b = tp_projector->full_bias();
    torch::NoGradGuard ng;
    model->projector->weight().copy_(w);
    model->projector->bias().copy_(b);
  }
  // The adapters of every stage, together on world rank 0 (a collective of the first pipeline).
  std::map<std::string, torch::Tensor> adapters;
  LoraAdapters* lora = cfg.training.trains_lora() ? model->llm->lora() : nullptr;
  if (lora) adapters = gather_pipeline_weights(rt, lora->named_weights());
  if (!rt.reports()) return;
  save_graph_phase_outputs(model, cfg.job.out_dir);
  if (lora)
    save_peft_adapter(cfg.job.out_dir + "/adapter", lora->settings(), cfg.model.path,
                      std::vector<std::pair<std::string, torch::Tensor>>(adapters.begin(), adapters.end()));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: stage %s done in %.1f s (data wait %.2f s over %lld batches); wrote %s/graph_projector.bin\n",
               name_of(cfg.training.stage), secs, stream.wait_seconds(), static_cast<long long>(stream.batches()),
               cfg.job.out_dir.c_str());
  // Shares of the padded batches' positions: the padding, and what the shared prefix saved.
  const auto share = [&](int64_t n) {
    return count.padded > 0 ? 100.0 * static_cast<double>(n) / static_cast<double>(count.padded) : 0.0;
  };
  if (!cfg.training.packing) {
    std::fprintf(stderr, "graphtune: rank 0 computed %lld positions, %.1f%% of them padding ([training].packing false)\n",
                 static_cast<long long>(count.computed), share(count.padded - count.tokens));
    return;
  }
  std::fprintf(stderr,
               "graphtune: rank 0 computed %lld tokens for its records' %lld: packing left out the %.1f%% of padded "
               "rows that is padding, the shared prompt prefix computed once a micro-batch another %.1f%%%s\n",
               static_cast<long long>(count.computed), static_cast<long long>(count.tokens),
               share(count.padded - count.tokens), share(count.tokens - count.computed),
               cfg.training.share_prefix ? "" : " ([training].share_prefix false)");
}

}  // namespace

int run_graph_phase(const JobConfig& cfg, const World& world, const c10::Device& device) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every record is read and validated before any weight is: a bad record costs nothing.
  std::vector<InstructionRecord> read = read_job_records(cfg.data);
  // The ranks form their groups once the model's shape is known, and each then reads only
  // its pipeline stage's weights.
  std::optional<ParallelRuntime> runtime;
  // All records are checked against the feature tables before training starts, not when a
  // background worker first meets a bad one.
  GraphGptSetup s = build_graphgpt(
      cfg, device,
      [&](const StageWeights& w) {
        runtime.emplace(make_parallel_runtime(cfg.parallelism, world, w));
        return LlamaStage{runtime->first_layer, runtime->last_layer, runtime->first_stage(), runtime->last_stage()};
      },
      &read);
  ParallelRuntime& rt = *runtime;
  GraphGpt& model = s.model;
  auto records = std::make_shared<const std::vector<InstructionRecord>>(std::move(read));

  if (cfg.training.trains_lora()) attach_lora(model, cfg, rt, device);
  const std::string fingerprint = model_fingerprint(checkpointed_shapes(model));
  GraphBatchOptions bo = batch_options(cfg, rt);
  bo.pin_memory = device.is_cuda();
  const int64_t steps = total_steps(cfg, static_cast<int64_t>(records->size()), bo);
  model->train();
  // Frozen and without gradient either way; in training mode only for its dropout, whose masks
  // come from each graph's dropout_seed (the batch stream sets them).
  model->encoder->set_dropout(cfg.model.encoder_dropout, cfg.where("model", "encoder_dropout"));
  model->encoder->train(cfg.model.encoder_dropout > 0);
  GraphTrainables trained = graph_trainables(model, cfg, rt);

  TrainCheckpoint checkpoint(rt, cfg, steps, checkpointed_tensors(model, rt, cfg, trained.tp_projector.get()), fingerprint);
  checkpoint.add_file_contents("config.json", llama_config_json(model->llm->config()));
  const int64_t first_step = checkpoint.resume();
  // A resumed run's stream starts where step first_step reads: each step takes chunks x m parts.
  const int64_t chunks = cfg.training.grad_accum_steps, m = cfg.parallelism.microbatches;
  bo.first_element = first_step * chunks * m;
  GraphBatchStream stream(records, s.features, *s.tokenizer, bo);
  if (rt.reports()) {
    report_start(model, cfg, static_cast<int64_t>(records->size()), steps);
    if (bo.group_by_length) report_lengths(stream);
  }
  report_layout(rt, cfg.parallelism);

  std::vector<GraphGptBatch> held;  // this rank's micro-batches of the current step
  PaddingCount padding;
  TrainLogFile log_file(rt.reports() ? cfg.job.out_dir : "", first_step);
  const auto data_wait = [&stream] {
    char buf[48];
    std::snprintf(buf, sizeof buf, " | data wait %.2f s", stream.wait_seconds());
    return std::string(buf);
  };
  train_decoder_stage(model->llm, graph_batches(stream, held, model, device, chunks, m,
                                                   {cfg.training.packing, cfg.training.share_prefix,
                                                    cfg.parallelism.balance_microbatches},
                                                   padding),
                      trained.params, cfg, steps, rt,
                      step_log_printer(rt, steps, log_file, data_wait), checkpoint.hooks(), /*report=*/true);
  save_outputs(model, trained.tp_projector.get(), rt, cfg, stream, padding, t0);
  rt.host.world->barrier();  // nobody exits (finalising MPI) while rank 0 still writes
  return 0;
}

}  // namespace gt
