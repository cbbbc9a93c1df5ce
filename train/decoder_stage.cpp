#include "train/decoder_stage.hpp"

#include <torch/torch.h>

#include <cstdio>

#include "parallel/parallel_runtime.hpp"
#include "train/mixed_precision.hpp"
#include "train/rank_report.hpp"

namespace gt {

std::vector<StepLog> train_decoder_stage(Llama& llm, const DecoderBatches& batches, const TrainedParameters& params,
                                         const JobConfig& cfg, int64_t steps, ParallelRuntime& rt,
                                         const std::function<void(const StepLog&)>& on_log,
                                         const TrainLoopHooks& hooks, bool report) {
  llm->set_activation_checkpointing(cfg.training.activation_checkpointing);
  const bool bf16 = cfg.model.bf16();
  const torch::Device device = llm->embedding_weight().device();  // an emptied weight keeps its device
  StageModel stage;
  stage.load = batches.load;
  bool kernel_reported = !report;  // at the first micro-batch, which says whether records are packed
  stage.forward = [&](int64_t k, int64_t j, const torch::Tensor& input) {
    const DecoderMicroBatch b = batches.micro(k, j);
    if (!kernel_reported) {
      kernel_reported = true;
      const LlamaConfig& mc = llm->config();
      report_attention_kernel(rt, device, mc.n_heads, mc.n_kv_heads, mc.head_dim(), bf16, !b.packed.empty());
    }
    // bf16: matmuls in bf16 from the fp32 master weights (or the bf16 frozen ones); the logits,
    // and so the loss, come out fp32.
    AutocastScope autocast(bf16, device.type());
    torch::Tensor x = rt.first_stage() ? b.embed() : input;
    x = llm->forward_layers(x, b.key_mask, rt.first_layer, rt.last_layer, b.packed);
    if (!rt.last_stage()) return x;
    return llm->head_loss_sum(x, b.labels);
  };
  StepRunner runner(rt, cfg.parallelism, cfg.training.grad_accum_steps, params, device);
  auto log = run_train_loop(
      params.decay, params.no_decay, cfg.optimizer, cfg.lr_scheduler, cfg.training, steps,
      [&](int64_t step) { return runner.run(step, stage); }, [&] { return runner.grad_norm(); }, on_log, hooks,
      params.own_groups);
  if (report) report_rank_peak(rt, runner);
  return log;
}

std::function<void(const StepLog&)> step_log_printer(const ParallelRuntime& rt, int64_t steps, TrainLogFile& file,
                                                      std::function<std::string()> extra) {
  return [&rt, steps, &file, extra = std::move(extra)](const StepLog& l) {
    file.write(l);
    if (!rt.reports()) return;
    std::fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s%s%s\n",
                 static_cast<long long>(l.step), static_cast<long long>(steps), l.loss, l.lr, l.grad_norm,
                 l.tokens_per_s, extra ? extra().c_str() : "", skipped_note(l).c_str());
  };
}

}  // namespace gt
