#include "train/rank_report.hpp"

#include <sys/resource.h>

#include <ATen/SDPBackend.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "layout/schedule.hpp"
#include "layout/schedule_sim.hpp"
#include "model/llama.hpp"
#include "model/packed_attention.hpp"
#include "train/device_memory.hpp"
#include "train/step_runner.hpp"

namespace gt {

void report_layout(const ParallelRuntime& rt, const ParallelismSection& parallelism) {
  // Called once the weights are in: the peak so far is what loading took (bench/load_memory.sh).
  if (rt.shape.world() == 1) {
    std::fprintf(stderr, "graphtune: weights loaded, peak RSS %.0f MiB\n", peak_rss_mib());
    return;
  }
  std::string how;
  if (rt.shape.pp > 1) how = ", " + std::string(name_of(parallelism.schedule)) + " over " + std::to_string(parallelism.microbatches) + " micro-batches";
  std::fprintf(stderr, "graphtune: rank %d: dp %d pp %d tp %d, decoder layers [%lld, %lld)%s, peak RSS %.0f MiB loaded\n",
               rt.world_rank, rt.coord.dp, rt.coord.pp, rt.coord.tp, static_cast<long long>(rt.first_layer),
               static_cast<long long>(rt.last_layer), how.c_str(), peak_rss_mib());
  if (rt.reports() && rt.shape.pp > 1) {
    // What the schedule costs in theory (equal stages, backward = 2 forwards), to set beside
    // the measured share each stage spends waiting (report_rank_peak).
    const int p = rt.shape.pp, m = static_cast<int>(parallelism.microbatches);
    const SimResult sim = simulate(make_schedule(parallelism.schedule, p, m), m);
    std::fprintf(stderr, "graphtune: %s with %d stages and %d micro-batches: simulated bubble %.3f, stage 0 holds %d\n",
                 name_of(parallelism.schedule), p, m, sim.bubble_fraction, sim.peak_in_flight.empty() ? 0 : sim.peak_in_flight[0]);
  }
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

void report_rank_peak(const ParallelRuntime& rt, const StepRunner& runner) {
  std::fprintf(stderr,
               "graphtune: rank %d: peak RSS %.0f MiB, at most %d micro-batches in flight, %lld gradient buckets "
               "reduced, median step %.1f ms, computing %.1f%% of it, peak step tensors %.1f MiB\n",
               rt.world_rank, peak_rss_mib(), runner.peak_in_flight(), static_cast<long long>(runner.reductions()),
               runner.median_step_seconds() * 1e3, runner.busy_fraction() * 100,
               static_cast<double>(runner.peak_step_bytes()) / (1 << 20));
  const DeviceMemory m = device_memory(runner.device());
  if (m.known)
    std::fprintf(stderr, "graphtune: rank %d: %s: %s\n", rt.world_rank, runner.device().str().c_str(),
                 describe_device_memory(m).c_str());
}

namespace {

// The kernel scaled_dot_product_attention picks for a training forward's inputs, as
// LlamaImpl::attention passes them: causal, no mask, the key/value heads grouped. The choice
// depends on shapes, dtype and device, not on values.
const char* sdpa_choice(const torch::Device& device, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, bool bf16) {
  const auto opts = torch::TensorOptions().dtype(bf16 ? torch::kBFloat16 : torch::kFloat32).device(device);
  const int64_t T = 128;
  const auto q = torch::zeros({1, n_heads, T, head_dim}, opts);
  const auto kv = torch::zeros({1, n_kv_heads, T, head_dim}, opts);
  switch (static_cast<at::SDPBackend>(
      at::_fused_sdp_choice(q, kv, kv, std::nullopt, 0.0, /*is_causal=*/true, std::nullopt, n_kv_heads != n_heads))) {
    case at::SDPBackend::math: return "math (unfused)";
    case at::SDPBackend::flash_attention: return "flash_attention";
    case at::SDPBackend::efficient_attention: return "efficient_attention";
    case at::SDPBackend::cudnn_attention: return "cudnn_attention";
    case at::SDPBackend::overrideable: return "overrideable";
    case at::SDPBackend::error: return "none (error)";
  }
  return "unknown";
}

}  // namespace

void report_attention_kernel(const ParallelRuntime& rt, const torch::Device& device, int64_t n_heads,
                             int64_t n_kv_heads, int64_t head_dim, bool bf16, bool packed) {
  if (!device.is_cuda()) return;
  const bool varlen = packed && flash_varlen_applies(device, bf16 ? at::kBFloat16 : at::kFloat, head_dim);
  const char* name = varlen ? "flash_attention varlen" : sdpa_choice(device, n_heads, n_kv_heads, head_dim, bf16);
  const char* how = varlen ? "the packed records in one launch, " : packed ? "a call per packed record, " : "";
  std::fprintf(stderr, "graphtune: rank %d: %s, attention %s (%s, causal, %s%lld heads of %lld), TF32 %s\n", rt.world_rank,
               device.str().c_str(), name, bf16 ? "bf16" : "fp32", how, static_cast<long long>(n_heads),
               static_cast<long long>(head_dim), at::globalContext().allowTF32CuBLAS() ? "on" : "off");
}

std::string skipped_note(const StepLog& line) {
  return line.skipped ? " | " + std::to_string(line.skipped) + " skipped" : "";
}

TrainLogFile::TrainLogFile(const std::string& dir, int64_t resumed_at) {
  if (dir.empty()) return;
  make_dirs(dir);
  const std::string path = dir + "/train_log.jsonl";
  std::string kept;
  if (resumed_at > 0 && path_exists(path)) {
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);) {
      long long step = 0;
      if (std::sscanf(line.c_str(), "{\"step\":%lld", &step) == 1 && step <= resumed_at) kept += line + "\n";
    }
  }
  path_ = path;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) fail_io(path, "cannot open for writing");
  if (!kept.empty() && (std::fputs(kept.c_str(), f_) < 0 || std::fflush(f_) != 0)) fail_io(path, "write failed");
}

TrainLogFile::~TrainLogFile() {
  if (f_) std::fclose(f_);
}

namespace {
// JSON has no NaN: a window of skipped steps only has no loss (null).
std::string json_number(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}
}  // namespace

void TrainLogFile::write(const StepLog& l) {
  if (!f_) return;
  std::fprintf(f_, "{\"step\":%lld,\"loss\":%s,\"lr\":%s,\"grad_norm\":%s,\"tokens_per_s\":%s",
               static_cast<long long>(l.step), json_number(l.loss, 17).c_str(), json_number(l.lr, 17).c_str(),
               json_number(l.grad_norm, 17).c_str(), json_number(l.tokens_per_s, 6).c_str());
  if (l.skipped) std::fprintf(f_, ",\"skipped\":%lld", static_cast<long long>(l.skipped));
  std::fputs("}\n", f_);
  if (std::fflush(f_) != 0 || std::ferror(f_)) fail_io(path_, "write failed");
}

}  // namespace gt
