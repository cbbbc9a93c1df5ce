#pragma once
// What the user watches during training, from the step metrics the workers send.
//
// On a terminal: one line redrawn in place ('\r' and clear-to-end-of-line), at most ten times a
// second, cut to the terminal's width (a wrapped line would no longer be redrawn in place):
//   [######..........] step 120/500  1m02s<3m12s  loss 2.341  1,234 tok/s  845 MiB
// (elapsed since the view started < time left). Elsewhere (a log file, a pipe): one plain line
// every log_every steps and at the last step:
//   step 120/500  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta 3m12s
// The time left is the average time per step since the first step seen, times the steps left:
// the first step carries the start-up (loading, compiling), so it is measured from, not in.
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
  // A whole line (no newline) printed above the bar, which is then redrawn.
  void message(const std::string& line);
  // Draws the latest step if throttling held it back, and ends the bar's line.
  void finish();

  void set_columns(int columns) { columns_ = columns; }

 private:
  int64_t total_for(const control::StepMetrics& m) const;
  std::optional<double> eta_s(const control::StepMetrics& m, double step_time_s) const;  // at that step
  std::string bar_line(const control::StepMetrics& m, double now) const;
  std::string plain_line(const control::StepMetrics& m, double now) const;
  void draw_bar(double now);

  std::FILE* out_;
  bool is_terminal_;
  int64_t total_steps_, log_every_;
  Clock now_s_;
  int columns_ = 80;
  double start_s_;

  std::optional<control::StepMetrics> latest_;
  double first_step_s_ = 0, latest_step_s_ = 0;
  int64_t first_step_ = 0;
  double last_draw_s_ = 0;
  bool bar_shown_ = false;   // a bar line is on screen, unterminated
  bool bar_stale_ = false;   // latest_ is newer than what is on screen
  int64_t printed_step_ = -1;  // the last step a plain line reported
};

}  // namespace gt
