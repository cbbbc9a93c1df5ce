// The worker's end of the control plane (control/control_client.hpp) as a torch-free program, run
// under real mpirun by tests/control_attack.py against control_server_driver. Each rank
// connects from the environment (GRAPHTUNE_CONTROL_ADDR and friends, exported with -x), reports
// a step and a checkpoint, waits up to 10 s for the launcher's stop, reports stopped and done.
//   control_client_driver [--no-done] [--linger S] [--unconnected]
//     --no-done      return from main without report_done: the exit path must end the
//                    background thread itself
//     --linger S     stay S seconds after the stop (heartbeats keep going)
//     --unconnected  no launcher in the environment: every call is a no-op
// Prints "ok NAME" per check and "FAIL NAME" on a mismatch (exit 1).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "control/control_client.hpp"
#include "control/control_protocol.hpp"

namespace {

int failures = 0;
int rank = 0;

void expect(const char* name, bool held) {
  std::printf("%s rank %d: %s\n", held ? "ok  " : "FAIL", rank, name);
  std::fflush(stdout);
  failures += !held;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int body(int argc, char** argv) {
  bool no_done = false, unconnected = false;
  double linger_s = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-done") no_done = true;
    else if (arg == "--unconnected") unconnected = true;
    else if (arg == "--linger" && i + 1 < argc) linger_s = std::atof(argv[++i]);
    else gt::fail(arg, "unknown option");
  }
  rank = env_int("OMPI_COMM_WORLD_RANK", 0);
  const int world = env_int("OMPI_COMM_WORLD_SIZE", 1);
  namespace control = gt::control;

  const double rss = control::rss_mib(), peak = control::peak_rss_mib();
  expect("rss from /proc/self/status is positive and below its peak", rss > 0 && peak >= rss);

  control::connect(rank, world);
  if (unconnected) {
    expect("without GRAPHTUNE_CONTROL_ADDR: not connected", !control::connected());
    control::report_step(control::StepMetrics{});
    control::report_error("nobody listens");
    control::report_done();
    expect("without a launcher: no stop", !control::stop_requested());
    return failures ? 1 : 0;
  }
  expect("connected", control::connected());
  control::StepMetrics m;
  m.step = 1;
  m.steps = 10;
  m.loss = 1.5 + rank;
  m.lr = 0.001;
  control::report_step(m);
  control::report_checkpoint(1, "/ckpt/step_1/rank" + std::to_string(rank));

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!control::stop_requested() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  expect("the launcher's stop arrived", control::stop_requested());
  control::report_stopped(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(linger_s));
  if (no_done) return failures ? 1 : 0;  // the background thread is still running here
  control::report_done();
  expect("disconnected after done", !control::connected());
  control::report_step(m);  // after done: a no-op, not a crash
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("control_client_driver", body, argc, argv); }
