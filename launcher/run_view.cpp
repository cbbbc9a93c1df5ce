#include "launcher/run_view.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "launcher/metrics_log.hpp"
#include "launcher/progress_view.hpp"
#include "launcher/summary_table.hpp"
#include "launcher/tensorboard_writer.hpp"

namespace gt {

namespace {

double wall_time_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

const char* status_of(int rank, const RankState& r, const JobResult& res) {
  if (r.stopped) return "stopped";
  if (r.done) return "done";
  if (!r.error.empty()) return "error";
  if (!r.said_hello) return "never connected";
  if (rank == res.failed_rank) return "failed";
  return "ended";  // by the launcher, after another rank failed
}

}  // namespace

RunView::RunView(std::string run_dir, bool append, int64_t log_every)
    : dir_(std::move(run_dir)), append_(append), log_every_(log_every) {}

RunView::~RunView() = default;

MetricsLog& RunView::metrics() {
  if (!metrics_) metrics_ = std::make_unique<MetricsLog>(dir_ + "/metrics.jsonl", append_);
  return *metrics_;
}

TensorBoardWriter& RunView::tensorboard() {
  if (!tensorboard_) tensorboard_ = std::make_unique<TensorBoardWriter>(dir_ + "/tensorboard");
  return *tensorboard_;
}

void RunView::say(const std::string& line) {
  if (progress_) {
    progress_->message("graphtune: " + line);
  } else {
    std::fprintf(stdout, "graphtune: %s\n", line.c_str());
    std::fflush(stdout);
  }
}

SupervisorSink RunView::sink(int attempt) {
  SupervisorSink s;
  eval_answered_.clear();  // a new attempt's ranks count from 0, after what it resumed
  eval_first_answered_ = -1;
  s.on_step = [this, attempt](const control::StepMetrics& m) {
    if (!progress_) progress_ = std::make_unique<ProgressView>(stdout, ::isatty(1) != 0, m.steps, log_every_);
    progress_->on_step(m);
    const double t = wall_time_s();
    // A step the workers skipped ([training].on_nonfinite) comes without a gradient norm.
    const bool skipped = !std::isfinite(m.loss) || !std::isfinite(m.grad_norm);
    nlohmann::json record{{"step", m.step},       {"steps", m.steps},         {"loss", m.loss},
                          {"lr", m.lr},           {"grad_norm", m.grad_norm}, {"tokens_per_s", m.tokens_per_s},
                          {"rss_mib", m.rss_mib}, {"peak_rss_mib", m.peak_rss_mib}, {"time", t},
                          {"attempt", attempt}};
    if (m.gpu_peak_reserved_mib > 0) {
      record["gpu_peak_allocated_mib"] = m.gpu_peak_allocated_mib;
      record["gpu_peak_reserved_mib"] = m.gpu_peak_reserved_mib;
    }
    if (skipped) {
      record["skipped"] = true;
      skipped_steps_.push_back(m.step);
    }
    metrics().write(record);
    tensorboard().add_scalar("train/loss", m.step, m.loss, t);
    tensorboard().add_scalar("train/lr", m.step, m.lr, t);
    tensorboard().add_scalar("train/grad_norm", m.step, m.grad_norm, t);
    tensorboard().add_scalar("train/tokens_per_s", m.step, m.tokens_per_s, t);
    tensorboard().add_scalar("train/rss_mib", m.step, m.rss_mib, t);
    if (m.gpu_peak_reserved_mib > 0) {
      tensorboard().add_scalar("train/gpu_peak_allocated_mib", m.step, m.gpu_peak_allocated_mib, t);
      tensorboard().add_scalar("train/gpu_peak_reserved_mib", m.step, m.gpu_peak_reserved_mib, t);
    }
    tensorboard().flush();  // TensorBoard shows the run live
    last_step_ = m.step;
    last_loss_ = m.loss;
    tokens_per_s_sum_ += m.tokens_per_s;
    ++steps_seen_;
  };
  s.on_checkpoint = [this](int64_t step, const std::string& path) {
    metrics().write({{"event", "checkpoint"}, {"step", step}, {"path", path}, {"time", wall_time_s()}});
    newest_checkpoint_ = path;
    ++checkpoints_;
    say("checkpoint at step " + std::to_string(step) + ": " + path);
  };
  s.on_eval_progress = [this, attempt](int rank, const control::EvalCounts& c, const control::StepMetrics& memory) {
    const double t = wall_time_s();
    if (eval_first_answered_ < 0) {  // the rate is measured from here: this report carries the start-up
      eval_first_s_ = t;
      eval_first_answered_ = c.answered;
    }
    eval_answered_[rank] = c.answered;
    eval_resumed_ = c.resumed;
    eval_records_ = c.records;
    eval_last_s_ = t;
    const int64_t answered = eval_answered();
    if (!progress_) progress_ = std::make_unique<ProgressView>(stdout, ::isatty(1) != 0, 0, log_every_);
    progress_->on_eval(answered, c.records, memory.rss_mib);
    metrics().write({{"event", "eval_progress"}, {"answered", answered}, {"records", c.records}, {"rank", rank},
                     {"rss_mib", memory.rss_mib}, {"time", t}, {"attempt", attempt}});
  };
  s.on_eval = [this](const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    const double t = wall_time_s();
    metrics().write({{"event", "eval"}, {"metrics", j}, {"time", t}});
    // Every figure of every dataset, as eval/<dataset>/<task>/<name>; the whole run's accuracy as
    // eval/accuracy. An eval has no step: its scalars go at step 0 of this folder's events.
    if (j.contains("accuracy") && j["accuracy"].is_number())
      tensorboard().add_scalar("eval/accuracy", 0, j["accuracy"].get<double>(), t);
    if (j.contains("datasets") && j["datasets"].is_object())
      for (auto& [dataset, blocks] : j["datasets"].items()) {
        if (!blocks.is_object()) continue;
        for (auto& [task, block] : blocks.items()) {
          if (!block.is_object()) continue;
          for (auto& [name, value] : block.items())
            if (value.is_number() && name != "n")
              tensorboard().add_scalar("eval/" + dataset + "/" + task + "/" + name, 0, value.get<double>(), t);
        }
      }
    tensorboard().flush();
    if (j.contains("accuracy") && j["accuracy"].is_number()) {
      eval_summary_ = "accuracy " + format_fixed(j["accuracy"].get<double>(), 4) +
                      (j.contains("macro_f1") && j["macro_f1"].is_number()
                           ? ", macro-F1 " + format_fixed(j["macro_f1"].get<double>(), 4)
                           : "");
      say("eval: " + eval_summary_);
    }
  };
  s.message = [this](const std::string& line) { say(line); };
  return s;
}

int64_t RunView::eval_answered() const {
  int64_t n = eval_resumed_;
  for (const auto& [rank, answered] : eval_answered_) n += answered;
  return n;
}

void RunView::finish() {
  if (progress_) progress_->finish();
  if (tensorboard_) tensorboard_->flush();
}

void RunView::print_summary(const std::string& title, const JobResult& res) const {
  std::vector<std::vector<std::string>> rows;
  bool gpus = false;
  for (const auto& [rank, r] : res.ranks) gpus = gpus || r.gpu_peak_reserved_mib > 0;
  for (const auto& [rank, r] : res.ranks) {
    rows.push_back({std::to_string(rank), r.host.empty() ? "?" : r.host, std::to_string(r.local_rank), r.device,
                    status_of(rank, r, res), format_fixed(r.peak_rss_mib, 0)});
    if (gpus)
      rows.back().push_back(r.gpu_peak_reserved_mib > 0 ? format_fixed(r.gpu_peak_allocated_mib, 0) + " / " +
                                                              format_fixed(r.gpu_peak_reserved_mib, 0)
                                                        : "-");
  }
  std::vector<std::string> header = {"rank", "host", "local rank", "device", "status", "peak RSS MiB"};
  if (gpus) header.push_back("peak GPU MiB allocated / reserved");
  std::string line = title + ": " + format_duration(res.seconds);
  if (steps_seen_) {
    line += ", " + std::to_string(last_step_) + " steps, loss " + format_fixed(last_loss_, 4) + ", " +
            format_count(tokens_per_s_sum_ / static_cast<double>(steps_seen_)) + " tokens/s";
  }
  if (checkpoints_) line += ", newest checkpoint " + newest_checkpoint_;
  if (eval_records_ > 0) {
    int64_t this_attempt = 0;
    for (const auto& [rank, n] : eval_answered_) this_attempt += n;
    const bool measured = eval_last_s_ > eval_first_s_ && this_attempt > eval_first_answered_;
    const double rate = measured ? static_cast<double>(this_attempt - eval_first_answered_) / (eval_last_s_ - eval_first_s_)
                                 : static_cast<double>(this_attempt) / std::max(res.seconds, 1e-9);
    line += ", " + format_count(static_cast<double>(eval_answered())) + " of " +
            format_count(static_cast<double>(eval_records_)) + " records answered";
    if (eval_resumed_ > 0) line += " (" + format_count(static_cast<double>(eval_resumed_)) + " before this attempt)";
    if (this_attempt > 0) line += ", " + format_fixed(rate, 2) + " answers/s";
    if (!eval_summary_.empty()) line += ", " + eval_summary_;
  }
  std::fprintf(stdout, "graphtune: %s\n%s", line.c_str(),
               format_table(header, rows).c_str());
  if (!skipped_steps_.empty()) {
    std::string steps;
    for (int64_t s : skipped_steps_) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
    const size_t n = skipped_steps_.size();
    std::fprintf(stdout, "graphtune: %zu step%s skipped (loss or gradients not finite): %s\n", n, n == 1 ? "" : "s",
                 steps.c_str());
  }
  const auto& d = res.drops;
  if (d.unauthenticated + d.oversized + d.malformed > 0)
    std::fprintf(stdout, "graphtune: control messages dropped: %lld unauthenticated, %lld oversized, %lld malformed\n",
                 static_cast<long long>(d.unauthenticated), static_cast<long long>(d.oversized),
                 static_cast<long long>(d.malformed));
  std::fflush(stdout);
}

}  // namespace gt
