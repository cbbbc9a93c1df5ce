#include "train/lm_trainer.hpp"

#include <torch/torch.h>


#include "common/error.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/mixed_precision.hpp"
#include "train/step_runner.hpp"

namespace gt {

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log) {
  ParallelRuntime rt = single_process_runtime(model->config().n_layers);
  return train_lm(model, data, cfg, rt, on_log);
}

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg, ParallelRuntime& rt,
                                const std::function<void(const LmLogLine&)>& on_log,
                                const std::function<void(const StepRunner&)>& at_end, const TrainLoopHooks& hooks) {
  model->train();
  model->set_activation_checkpointing(cfg.activation_checkpointing);
  // Decay matrices only; norms are excluded, as Hugging Face's Trainer does. A pipeline stage
  // trains the weights it holds (the others are empty).
  std::vector<torch::Tensor> decay, no_decay;
  StepParams sp;
  for (auto& [name, p] : model->named_weights()) {
    if (p.numel() == 0) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    // With tied embeddings, the first and the last stage each hold the table: one as
    // embeddings, one as the head. Their gradients are summed so the two copies stay equal.
    if (rt.shape.pp > 1 && name == "model.embed_tokens.weight") sp.tied.push_back(p);
  }
  sp.trainable = decay;
  sp.trainable.insert(sp.trainable.end(), no_decay.begin(), no_decay.end());

  const bool bf16 = is_bf16(cfg.dtype);
  const auto device = model->embedding_weight().device().type();
  const int64_t m = cfg.microbatches, chunks = cfg.grad_accum_steps, per_micro = cfg.batch_size / (rt.shape.dp * m);
  torch::Tensor global;
  StageModel stage;
  stage.load = [&](int64_t) {
    // One draw per optimizer step on every rank (the same seeded sampler): accumulation over k
    // micro-batches of b, or r replicas of b / r, see the same windows as one batch of k * b.
    global = data.next(cfg.batch_size * chunks);
    const int64_t rows = chunks * m * per_micro;
    return std::make_pair(rows * cfg.seq_len, rows * cfg.seq_len);
  };
  stage.forward = [&](int64_t k, int64_t j, const torch::Tensor& input) {
    // Chunk k's rows, then this replica's share, then micro-batch j of it.
    const int64_t first = k * cfg.batch_size + (rt.coord.dp * m + j) * per_micro;
    auto batch = global.narrow(0, first, per_micro);
    // Inputs and labels are the same window; the loss shifts (position t predicts t+1), and the
    // one extra token makes the last position's label real.
    torch::Tensor x;
    {
      // bf16: matmuls in bf16 from the fp32 master weights; the logits come out fp32.
      AutocastScope autocast(bf16, device);
      x = rt.first_stage() ? model->embed(batch) : input;
      x = model->forward_layers(x, {}, rt.first_layer, rt.last_layer);
      if (!rt.last_stage()) return x;
      return model->head_loss_sum(x, batch);  // the logits come out fp32
    }
  };
  StepRunner runner(rt, cfg, sp);
  auto log = run_train_loop(
      decay, no_decay, cfg, cfg.steps, [&](int64_t step) { return runner.run(step, stage); },
      [&] { return runner.grad_norm(); }, on_log, hooks);
  if (at_end) at_end(runner);
  return log;
}

}  // namespace gt
