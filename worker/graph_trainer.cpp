#include "worker/graph_trainer.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "common/error.hpp"
#include "data/instructions.hpp"
#include "worker/graph_batches.hpp"
#include "worker/graphgpt_setup.hpp"
#include "worker/job_records.hpp"
#include "worker/mixed_precision.hpp"
#include "worker/train_loop.hpp"

namespace gt {

int run_graph_stage(const TrainConfig& cfg) {
  auto t0 = std::chrono::steady_clock::now();
  // Every record is read and validated before any weight is: a bad record costs nothing.
  std::vector<InstructionRecord> read = read_job_records(cfg);
  GraphGptSetup s = build_graphgpt(cfg);
  GraphGpt& model = s.model;
  // All records are checked against the feature tables before training starts, not when a
  // background worker first meets a bad one.
  check_records_against_features(read, s.features, cfg);
  auto records = std::make_shared<const std::vector<InstructionRecord>>(std::move(read));

  GraphBatchStream stream(records, s.features, *s.tokenizer, cfg.max_len, cfg.batch_size,
                          static_cast<uint64_t>(cfg.seed), static_cast<int>(cfg.num_workers), cfg.instructions);
  const int64_t steps =
      cfg.steps > 0 ? cfg.steps : std::max<int64_t>(1, cfg.epochs * stream.steps_per_epoch() / cfg.grad_accum_steps);
  int64_t trainable = 0;
  for (auto& p : model->trainable_parameters()) trainable += p.numel();
  std::fprintf(stderr,
               "graphtune: stage %s: %zu records, %lld steps (batch %lld x accumulation %lld), LLM %s frozen, "
               "%lld trainable parameters (%s)\n",
               cfg.stage.c_str(), records->size(), static_cast<long long>(steps), static_cast<long long>(cfg.batch_size),
               static_cast<long long>(cfg.grad_accum_steps), cfg.model_path.c_str(), static_cast<long long>(trainable),
               cfg.trainable.c_str());

  model->train();
  model->encoder->eval();  // frozen: no dropout
  model->llm->set_activation_checkpointing(cfg.activation_checkpointing);
  std::vector<torch::Tensor> decay{model->projector->weight()}, no_decay{model->projector->bias()};
  if (cfg.trainable == "graphgpt") {
    no_decay.push_back(model->trainable_parameters().back());  // the <g_start>/<g_end> rows
  } else {
    model->trainable_parameters().back().set_requires_grad(false);
  }
  // Frozen LLM and encoder are bf16 already (build_graphgpt); the projector and rows stay fp32.
  std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.dtype, frozen_bytes(*model)).c_str());
  const bool bf16 = is_bf16(cfg.dtype);
  const auto device = model->projector->weight().device().type();
  auto micro = [&](int64_t, int64_t) {
    GraphGptBatch batch = stream.next();
    torch::Tensor logits;
    {
      AutocastScope autocast(bf16, device);  // bf16 matmuls; the logits come out fp32
      logits = model->forward(batch);
    }
    auto loss = causal_lm_loss(logits, batch.labels);  // outside autocast: fp32
    (loss / static_cast<double>(cfg.grad_accum_steps)).backward();
    return MicroStep{loss.item<double>(), batch.num_tokens()};
  };
  run_train_loop(decay, no_decay, cfg, steps, micro, [&](const StepLog& l) {
    std::fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | data wait %.2f s\n",
                 static_cast<long long>(l.step), static_cast<long long>(steps), l.loss, l.lr, l.grad_norm,
                 l.tokens_per_s, stream.wait_seconds());
  });

  save_graph_stage_outputs(model, cfg.out_dir);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: stage %s done in %.1f s (data wait %.2f s over %lld batches); wrote %s/graph_projector.bin\n",
               cfg.stage.c_str(), secs, stream.wait_seconds(), static_cast<long long>(stream.batches()),
               cfg.out_dir.c_str());
  return 0;
}

}  // namespace gt
