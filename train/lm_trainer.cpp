#include "train/lm_trainer.hpp"

#include <torch/torch.h>

#include "model/host_to_device.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/decoder_stage.hpp"

namespace gt {

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const JobConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log) {
  ParallelRuntime rt = single_process_runtime(model->config().n_layers);
  return train_lm(model, data, cfg, rt, on_log);
}

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const JobConfig& cfg, ParallelRuntime& rt,
                                const std::function<void(const LmLogLine&)>& on_log, const TrainLoopHooks& hooks,
                                bool report) {
  model->train();
  // Decay matrices only; norms are excluded, as Hugging Face's Trainer does. A pipeline stage
  // trains the weights it holds (the others are empty).
  TrainedParameters params;
  for (auto& [name, p] : model->named_weights()) {
    if (p.numel() == 0) continue;
    (p.dim() >= 2 ? params.decay : params.no_decay).push_back(p);
    // With tied embeddings, the first and the last stage each hold the table: one as
    // embeddings, one as the head. Their gradients are summed so the two copies stay equal.
    if (rt.shape.pp > 1 && name == "model.embed_tokens.weight") params.tied.push_back(p);
  }

  const int64_t batch = cfg.training.batch_size, chunks = cfg.training.grad_accum_steps;
  const int64_t m = cfg.parallelism.microbatches, per_micro = batch / (rt.shape.dp * m);
  const torch::Device device = model->embedding_weight().device();  // an emptied weight keeps its device
  torch::Tensor global, global_placed;  // the step's windows on the host (labels) and on the device (inputs)
  DecoderBatches batches;
  batches.load = [&](int64_t) {
    // One draw per optimizer step on every rank (the same seeded sampler): accumulation over k
    // micro-batches of b, or r replicas of b / r, see the same windows as one batch of k * b.
    global = data.next(batch * chunks);
    global_placed = host_to_device(global, device);  // one copy a step, queued ahead of the compute
    const int64_t rows = chunks * m * per_micro;
    return std::make_pair(rows * cfg.training.seq_len, rows * cfg.training.seq_len);
  };
  batches.micro = [&](int64_t k, int64_t j) {
    // Chunk k's rows, then this replica's share, then micro-batch j of it. Inputs and labels are
    // the same window; the loss shifts (position t predicts t+1), and the one extra token makes
    // the last position's label real.
    const int64_t first = k * batch + (rt.coord.dp * m + j) * per_micro;
    const torch::Tensor ids = global_placed.narrow(0, first, per_micro);
    return DecoderMicroBatch{[&model, ids] { return model->embed(ids); }, {}, global.narrow(0, first, per_micro)};
  };
  return train_decoder_stage(model, batches, params, cfg, cfg.training.steps, rt, on_log, hooks, report);
}

}  // namespace gt
