#pragma once
// What the user sees of a run and what its folder records, fed by the supervisor's events: the
// progress bar, metrics.jsonl, TensorBoard events, the launcher's own lines, and the summary at
// the end of each attempt. The files are opened at the first event, so a job that logs nothing
// (an evaluation, a rejected job) leaves no empty files.
#include <cstdint>
#include <map>
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
  // An eval's records answered and committed so far (those of an earlier attempt included), of
  // how many; 0 of 0 before its first report.
  int64_t eval_answered() const;
  int64_t eval_records() const { return eval_records_; }

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
  // An eval: each rank's records answered in the current attempt, what the attempt started from,
  // the records in all, and when the attempt's first report came.
  std::map<int, int64_t> eval_answered_;
  int64_t eval_resumed_ = 0, eval_records_ = 0, eval_first_answered_ = -1;
  double eval_first_s_ = 0, eval_last_s_ = 0;
  std::string eval_summary_;  // "accuracy 0.8440, macro-F1 0.8390" once the metrics came
};

}  // namespace gt
