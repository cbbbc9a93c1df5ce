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

std::optional<double> ProgressView::eta_s(const Frame& f, double at_s) const {
  if (f.total <= 0) return std::nullopt;
  if (f.count >= f.total) return 0.0;
  if (f.count <= first_count_) return std::nullopt;  // one report seen: no rate yet
  const double per_unit = (at_s - first_s_) / static_cast<double>(f.count - first_count_);
  return per_unit * static_cast<double>(f.total - f.count);
}

double ProgressView::answers_per_s() const {
  if (!latest_ || latest_->count <= first_count_ || latest_s_ <= first_s_) return 0.0;
  return static_cast<double>(latest_->count - first_count_) / (latest_s_ - first_s_);
}

std::string ProgressView::bar_line(const Frame& f, double now) const {
  const int filled =
      f.total > 0 ? static_cast<int>(std::clamp<int64_t>(kBarWidth * f.count / f.total, 0, kBarWidth)) : 0;
  std::string line = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
  line += std::string(f.eval ? " eval " : " step ") + std::to_string(f.count) +
          (f.total > 0 ? "/" + std::to_string(f.total) : "");
  // A redraw between reports (after a message) counts the time left down from the last estimate.
  auto eta = eta_s(f, latest_s_);
  if (eta) eta = std::max(0.0, *eta - (now - latest_s_));
  line += "  " + format_duration(now - start_s_) + "<" + (eta ? format_duration(*eta) : "?");
  if (f.eval) {
    line += "  " + printf_string("%.3g", answers_per_s()) + " answers/s";
    line += "  " + printf_string("%.0f", f.rss_mib) + " MiB";
    return line;
  }
  line += "  loss " + printf_string("%.4g", f.step.loss);
  line += "  " + format_count(f.step.tokens_per_s) + " tok/s";
  line += "  " + printf_string("%.0f", f.step.rss_mib) + " MiB";
  return line;
}

std::string ProgressView::plain_line(const Frame& f, double now) const {
  std::string line = std::string(f.eval ? "eval " : "step ") + std::to_string(f.count) +
                     (f.total > 0 ? "/" + std::to_string(f.total) : "");
  if (f.eval) {
    line += " records  answers/s " + printf_string("%.3g", answers_per_s());
    line += "  rss " + printf_string("%.0f", f.rss_mib) + " MiB";
  } else {
    const control::StepMetrics& m = f.step;
    line += "  loss " + printf_string("%.5g", m.loss);
    line += "  lr " + printf_string("%.2e", m.lr);
    line += "  grad_norm " + printf_string("%.3g", m.grad_norm);
    line += "  tokens/s " + format_count(m.tokens_per_s);
    line += "  rss " + printf_string("%.0f", m.rss_mib) + " MiB";
  }
  const auto eta = eta_s(f, now);
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
  Frame f;
  f.count = m.step;
  f.total = total_steps_ > 0 ? total_steps_ : m.steps;
  f.step = m;
  on_frame(f);
}

void ProgressView::on_eval(int64_t answered, int64_t records, double rss_mib) {
  Frame f;
  f.eval = true;
  f.count = answered;
  f.total = records;
  f.rss_mib = rss_mib;
  on_frame(f);
}

// Steps every log_every; an eval's records, whose reports come a batch at a time from every
// rank, each time another tenth of them is in.
bool ProgressView::plain_due(const Frame& f) const {
  if (!f.eval) return f.count % log_every_ == 0;
  if (f.total <= 0 || f.count == 0) return false;  // an attempt's first report, before any answer
  const int64_t was = printed_count_ < 0 ? -1 : printed_count_ * 10 / f.total;
  return f.count * 10 / f.total > was;
}

void ProgressView::on_frame(const Frame& f) {
  const double now = now_s_();
  if (!latest_) {
    first_s_ = now;
    first_count_ = f.count;
  }
  latest_ = f;
  latest_s_ = now;
  const bool last = f.total > 0 && f.count >= f.total;
  if (is_terminal_) {
    if (!bar_shown_ || last || now - last_draw_s_ >= kMinRedrawS) {
      draw_bar(now);
    } else {
      bar_stale_ = true;
    }
    return;
  }
  if (plain_due(f) || last) {
    std::fputs((plain_line(f, now) + "\n").c_str(), out_);
    std::fflush(out_);
    printed_count_ = f.count;
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
  } else if (printed_count_ != latest_->count) {  // stopped between two reports: say where
    std::fputs((plain_line(*latest_, now) + "\n").c_str(), out_);
    printed_count_ = latest_->count;
  }
  std::fflush(out_);
}

}  // namespace gt
