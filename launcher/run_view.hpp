#pragma once
// What the user sees of a run and what its folder records, fed by the supervisor's events: the
// progress bar, metrics.jsonl, TensorBoard events, the launcher's own lines, and the summary at
// the end of each attempt. The files are opened at the first event, so a job that logs nothing
// (an evaluation, a rejected job) leaves no empty files.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "launcher/job_supervisor.hpp"

namespace gt {

class MetricsLog;
class ProgressView;
class TensorBoardWriter;

class RunView {
 public:
  // `append`: a resumed run adds to the run folder's metrics.jsonl instead of starting it anew.
  RunView(std::string run_dir, bool append, int64_t log_every);
  ~RunView();
  RunView(const RunView&) = delete;
  RunView& operator=(const RunView&) = delete;

  // The supervisor's events of attempt `attempt` (0-based), recorded and shown.
  SupervisorSink sink(int attempt);
  // "graphtune: LINE", above the progress bar on a terminal, else on stdout.
  void say(const std::string& line);
  // After an attempt: the progress bar's last frame, the event files flushed.
  void finish();
  // "graphtune: TITLE: 3m12s, 200 steps, loss 1.2345, 1,234 tokens/s, newest checkpoint DIR", a
  // row per rank (host, local rank, device, status, peak RSS), the skipped steps, and the
  // control messages dropped.
  void print_summary(const std::string& title, const JobResult& res) const;
  // Whether the workers reported a step (a job rejected before its first one wrote nothing).
  bool saw_steps() const { return steps_seen_ > 0; }

 private:
  MetricsLog& metrics();
  TensorBoardWriter& tensorboard();

  std::string dir_;
  bool append_ = false;
  int64_t log_every_ = 10;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<ProgressView> progress_;
  int64_t last_step_ = 0, checkpoints_ = 0, steps_seen_ = 0;
  double last_loss_ = 0, tokens_per_s_sum_ = 0;
  std::string newest_checkpoint_;
  std::vector<int64_t> skipped_steps_;  // over every attempt
};

}  // namespace gt
