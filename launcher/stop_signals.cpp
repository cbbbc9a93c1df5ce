#include "launcher/stop_signals.hpp"

#include <csignal>

namespace gt {

namespace {
volatile std::sig_atomic_t g_count = 0;
volatile std::sig_atomic_t g_last = 0;

extern "C" void on_stop_signal(int sig) {
  g_count = g_count + 1;
  g_last = sig;
}
}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal_count() { return g_count; }
int last_stop_signal() { return g_last; }

}  // namespace gt
