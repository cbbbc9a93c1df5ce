#pragma once
// What a training rank says about itself, and the per-step log file. Lines are prefixed with the
// world rank, so interleaved output from several ranks still reads.
#include <cstdio>
#include <string>

#include <torch/types.h>

#include "config/job_config.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/train_loop.hpp"

namespace gt {

class StepRunner;

// "graphtune: rank 2: dp 0 pp 1 tp 0, decoder layers [2, 4), 1f1b over 4 micro-batches" (every rank).
void report_layout(const ParallelRuntime& rt, const ParallelismSection& parallelism);
// Peak resident memory of this process and the most micro-batches it held at once, and on a GPU
// the CUDA caching allocator's peaks (every rank).
void report_rank_peak(const ParallelRuntime& rt, const StepRunner& runner);
// On a GPU (every rank): "graphtune: rank 0: cuda:0, attention flash_attention (bf16, causal,
// 32 heads of 128), TF32 on": the kernel libtorch's scaled_dot_product_attention picks for this
// model's training forward, or flash attention's variable-length kernel for packed records in
// bf16 (flash_varlen_applies). Nothing on the CPU.
void report_attention_kernel(const ParallelRuntime& rt, const torch::Device& device, int64_t n_heads,
                             int64_t n_kv_heads, int64_t head_dim, bool bf16, bool packed);
// " | 2 skipped" for a log line whose window had skipped steps ([training].on_nonfinite); "" otherwise.
std::string skipped_note(const StepLog& line);
// Peak resident set size of this process, MiB (getrusage).
double peak_rss_mib();

// <dir>/train_log.jsonl: one JSON line per logged step with full-precision numbers, for tests
// and plots ({"step":1,"loss":...,"lr":...,"grad_norm":...,"tokens_per_s":...}). An empty dir
// writes nothing (ranks other than the reporting one). Truncated when opened, except that a
// run resumed at step `resumed_at` keeps the lines of steps up to it: the log reads as one run.
class TrainLogFile {
 public:
  explicit TrainLogFile(const std::string& dir, int64_t resumed_at = 0);
  ~TrainLogFile();
  TrainLogFile(const TrainLogFile&) = delete;
  TrainLogFile& operator=(const TrainLogFile&) = delete;
  void write(const StepLog& line);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace gt
