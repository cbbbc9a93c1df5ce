#include "launcher/progress_view.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>

#include "launcher/summary_table.hpp"

namespace gt {
namespace {

constexpr int kBarWidth = 16;
constexpr double kMinRedrawS = 0.1;  // ten redraws a second look live and cost nothing
constexpr const char* kClearToEol = "\x1b[K";

std::string printf_string(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

double ProgressView::steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressView::ProgressView(std::FILE* out, bool is_terminal, int64_t total_steps, int64_t log_every, Clock now_s)
    : out_(out),
      is_terminal_(is_terminal),
      total_steps_(total_steps),
      log_every_(std::max<int64_t>(log_every, 1)),
      now_s_(std::move(now_s)),
      start_s_(now_s_()) {
  winsize size{};
  if (is_terminal_ && ::ioctl(::fileno(out_), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) columns_ = size.ws_col;
}

int64_t ProgressView::total_for(const control::StepMetrics& m) const {
  return total_steps_ > 0 ? total_steps_ : m.steps;
}

std::optional<double> ProgressView::eta_s(const control::StepMetrics& m, double step_time_s) const {
  const int64_t total = total_for(m);
  if (total <= 0) return std::nullopt;
  if (m.step >= total) return 0.0;
  if (m.step <= first_step_) return std::nullopt;  // one step seen: no rate yet
  const double per_step = (step_time_s - first_step_s_) / static_cast<double>(m.step - first_step_);
  return per_step * static_cast<double>(total - m.step);
}

std::string ProgressView::bar_line(const control::StepMetrics& m, double now) const {
  const int64_t total = total_for(m);
  const int filled =
      total > 0 ? static_cast<int>(std::clamp<int64_t>(kBarWidth * m.step / total, 0, kBarWidth)) : 0;
  std::string line = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
  line += " step " + std::to_string(m.step) + (total > 0 ? "/" + std::to_string(total) : "");
  // A redraw between steps (after a message) counts the time left down from the last step's estimate.
  auto eta = eta_s(m, latest_step_s_);
  if (eta) eta = std::max(0.0, *eta - (now - latest_step_s_));
  line += "  " + format_duration(now - start_s_) + "<" + (eta ? format_duration(*eta) : "?");
  line += "  loss " + printf_string("%.4g", m.loss);
  line += "  " + format_count(m.tokens_per_s) + " tok/s";
  line += "  " + printf_string("%.0f", m.rss_mib) + " MiB";
  return line;
}

std::string ProgressView::plain_line(const control::StepMetrics& m, double now) const {
  const int64_t total = total_for(m);
  std::string line = "step " + std::to_string(m.step) + (total > 0 ? "/" + std::to_string(total) : "");
  line += "  loss " + printf_string("%.5g", m.loss);
  line += "  lr " + printf_string("%.2e", m.lr);
  line += "  grad_norm " + printf_string("%.3g", m.grad_norm);
  line += "  tokens/s " + format_count(m.tokens_per_s);
  line += "  rss " + printf_string("%.0f", m.rss_mib) + " MiB";
  const auto eta = eta_s(m, now);
  line += "  eta " + (eta ? format_duration(*eta) : std::string("--"));
  return line;
}

void ProgressView::draw_bar(double now) {
  std::string line = bar_line(*latest_, now);
  // One column short of the width: a line that fills the last column wraps on some terminals.
  if (columns_ > 1 && line.size() > static_cast<std::size_t>(columns_ - 1)) {
    line.resize(columns_ - 1);
    line.erase(line.find_last_not_of(' ') + 1);
  }
  std::fputs(("\r" + line + kClearToEol).c_str(), out_);
  std::fflush(out_);
  bar_shown_ = true;
  bar_stale_ = false;
  last_draw_s_ = now;
}

void ProgressView::on_step(const control::StepMetrics& m) {
  const double now = now_s_();
  if (!latest_) {
    first_step_s_ = now;
    first_step_ = m.step;
  }
  latest_ = m;
  latest_step_s_ = now;
  const int64_t total = total_for(m);
  const bool last = total > 0 && m.step >= total;
  if (is_terminal_) {
    if (!bar_shown_ || last || now - last_draw_s_ >= kMinRedrawS) {
      draw_bar(now);
    } else {
      bar_stale_ = true;
    }
    return;
  }
  if (m.step % log_every_ == 0 || last) {
    std::fputs((plain_line(m, now) + "\n").c_str(), out_);
    std::fflush(out_);
    printed_step_ = m.step;
  }
}

void ProgressView::message(const std::string& line) {
  if (is_terminal_ && bar_shown_) std::fprintf(out_, "\r%s", kClearToEol);  // the message takes the bar's line
  std::fputs((line + "\n").c_str(), out_);
  bar_shown_ = false;
  if (is_terminal_ && latest_) {
    draw_bar(now_s_());
  } else {
    std::fflush(out_);
  }
}

void ProgressView::finish() {
  if (!latest_) return;
  const double now = now_s_();
  if (is_terminal_) {
    if (bar_stale_) draw_bar(now);
    if (bar_shown_) std::fputs("\n", out_);
    bar_shown_ = false;
  } else if (printed_step_ != latest_->step) {  // stopped between two reports: say where
    std::fputs((plain_line(*latest_, now) + "\n").c_str(), out_);
    printed_step_ = latest_->step;
  }
  std::fflush(out_);
}

}  // namespace gt
