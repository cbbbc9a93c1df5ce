#pragma once
// What the user watches while a job runs: a training's steps, or an evaluation's answered
// records, from what the workers send.
//
// On a terminal: one line redrawn in place ('\r' and clear-to-end-of-line), at most ten times a
// second, cut to the terminal's width (a wrapped line would no longer be redrawn in place):
//   [######..........] step 120/500  1m02s<3m12s  loss 2.341  1,234 tok/s  845 MiB
//   [######..........] eval 120/607  1m02s<3m12s  3.21 answers/s  845 MiB
// (elapsed since the view started < time left). Elsewhere (a log file, a pipe): one plain line
// every log_every steps (an eval: every tenth of its records) and at the last:
//   step 120/500  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta 3m12s
//   eval 120/607 records  answers/s 3.21  rss 845 MiB  eta 3m12s
// The time left is the average time per step (record) since the first one seen, times those
// left: the first carries the start-up (loading, compiling), so it is measured from, not in.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "control/control_protocol.hpp"

namespace gt {

class ProgressView {
 public:
  using Clock = std::function<double()>;  // seconds; any origin

  static double steady_now_s();

  // total_steps 0: taken from the metrics' `steps`. The width of a terminal is asked of `out`
  // (80 when it cannot say). Tests pass their own clock.
  ProgressView(std::FILE* out, bool is_terminal, int64_t total_steps, int64_t log_every,
               Clock now_s = &ProgressView::steady_now_s);

  void on_step(const control::StepMetrics& m);
  // An eval: `answered` records of `records` (those answered before a resume included); `rss_mib`
  // the reporting rank's.
  void on_eval(int64_t answered, int64_t records, double rss_mib);
  // A whole line (no newline) printed above the bar, which is then redrawn.
  void message(const std::string& line);
  // Draws the latest progress if throttling held it back, and ends the bar's line.
  void finish();

  void set_columns(int columns) { columns_ = columns; }

 private:
  // One report of progress, whatever the job: `count` of `total` (0: unknown) and its own fields.
  struct Frame {
    bool eval = false;
    int64_t count = 0, total = 0;
    control::StepMetrics step;  // a training's
    double rss_mib = 0;         // an eval's
  };
  void on_frame(const Frame& f);
  std::optional<double> eta_s(const Frame& f, double at_s) const;  // at the time of that frame
  double answers_per_s() const;
  std::string bar_line(const Frame& f, double now) const;
  std::string plain_line(const Frame& f, double now) const;
  bool plain_due(const Frame& f) const;
  void draw_bar(double now);

  std::FILE* out_;
  bool is_terminal_;
  int64_t total_steps_, log_every_;
  Clock now_s_;
  int columns_ = 80;
  double start_s_;

  std::optional<Frame> latest_;
  double first_s_ = 0, latest_s_ = 0;
  int64_t first_count_ = 0;
  double last_draw_s_ = 0;
  bool bar_shown_ = false;   // a bar line is on screen, unterminated
  bool bar_stale_ = false;   // latest_ is newer than what is on screen
  int64_t printed_count_ = -1;  // what the last plain line reported
};

}  // namespace gt
