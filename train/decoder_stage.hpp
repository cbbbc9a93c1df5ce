#pragma once
// Training this rank's pipeline stage of a LLaMA decoder: what the lm and the graph phases share.
// Each micro-batch is embedded on stage 0 (the phase decides how: token ids, or tokens with the
// graphs spliced in), runs through the stage's decoder layers, and is scored by the head on the
// last stage, under bf16 autocast when [model].dtype asks for it; the optimizer loop then runs
// StepRunner's steps, whatever the layout. A phase supplies its micro-batches and the parameters
// it trains, nothing else.
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.hpp"
#include "model/llama.hpp"
#include "train/step_runner.hpp"
#include "train/train_loop.hpp"

namespace gt {

struct ParallelRuntime;
class TrainLogFile;

// One micro-batch as the decoder reads it.
struct DecoderMicroBatch {
  std::function<torch::Tensor()> embed;  // its input embeddings [B, T, dim]; called on stage 0 only
  torch::Tensor key_mask;                // [B, T]: 1 real token, 0 padding; undefined without padding
  torch::Tensor labels;                  // [B, T]: -100 where nothing is learned (the last stage's loss)
  PackedRecords packed;                  // packed (B = 1): the records' layout; key_mask is then unused
};

// What a phase feeds its decoder stage. Micro-batch (k, j): accumulation chunk k <
// [training].grad_accum_steps, pipeline micro-batch j < [parallelism].microbatches.
struct DecoderBatches {
  // Loads this rank's micro-batches of optimizer step `step`; returns the learned positions
  // (labels that are not -100, after the shift) and the real tokens they hold, on this rank.
  std::function<std::pair<int64_t, int64_t>(int64_t step)> load;
  std::function<DecoderMicroBatch(int64_t k, int64_t j)> micro;
};

// Trains `steps` optimizer steps of this rank's stage of `llm` (decoder layers [rt.first_layer,
// rt.last_layer), which must be all it still holds: LlamaImpl::keep_only) and returns the log,
// the same on every rank. `on_log` gets each logged line; `hooks` resume and checkpoint the run.
// With `report`, every rank prints its peak memory and step statistics at the end
// (report_rank_peak).
std::vector<StepLog> train_decoder_stage(Llama& llm, const DecoderBatches& batches, const TrainedParameters& params,
                                         const JobConfig& cfg, int64_t steps, ParallelRuntime& rt,
                                         const std::function<void(const StepLog&)>& on_log,
                                         const TrainLoopHooks& hooks = {}, bool report = false);

// The on_log a phase gives train_decoder_stage: every logged line into train_log.jsonl (`file`,
// open on the reporting rank only) and, on that rank, printed as "step 10/200 | loss 2.3456 |
// lr 3.00e-03 | grad norm 0.812 | 1234 tok/s", then `extra()` (" | data wait 0.12 s") and the
// skipped steps.
std::function<void(const StepLog&)> step_log_printer(const ParallelRuntime& rt, int64_t steps, TrainLogFile& file,
                                                      std::function<std::string()> extra = {});

}  // namespace gt
