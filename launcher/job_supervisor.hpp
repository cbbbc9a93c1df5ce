#pragma once
// Watches one run of mpirun: the workers' control connections (hello, heartbeats, steps,
// checkpoints, errors, done) and the mpirun process, and decides how the run ended. A rank that
// disconnects without saying done, or goes silent for longer than the heartbeat timeout, ends
// the whole job at once, and the result names it; so does a stop signal, gracefully.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "control/control_protocol.hpp"
#include "control/control_server.hpp"
#include "launcher/job_process.hpp"

namespace gt {

struct RankState {
  bool said_hello = false, done = false, stopped = false, disconnected = false;
  std::string host, device, error;
  int local_rank = 0;
  long pid = 0;
  double rss_mib = 0, peak_rss_mib = 0;
  double gpu_peak_allocated_mib = 0, gpu_peak_reserved_mib = 0;  // 0: not on a GPU
};

enum class JobOutcome {
  kFinished,    // mpirun exited 0
  kInputError,  // a worker rejected its input (exit 2): restarting would not help
  kFailed,      // a rank died, stalled or failed
  kStopped,     // a stop signal: the workers saved and stopped (or were ended after the grace)
};

struct JobResult {
  JobOutcome outcome = JobOutcome::kFailed;
  ExitStatus mpirun;
  std::string failure;      // "rank 1 (pid 123 on node-a) ...": why it failed
  int failed_rank = -1;     // the rank that failed first (-1: none, or not one rank's doing)
  int signal = 0;           // kStopped: SIGINT or SIGTERM
  int64_t stopped_step = 0; // kStopped: the step the workers saved (0: none)
  std::map<int, RankState> ranks;
  control::DropCounts drops;
  double seconds = 0;
};

struct SupervisorOptions {
  int world = 1;
  double heartbeat_timeout_s = 30;  // no message for this long: the rank is stalled
  double startup_timeout_s = 300;   // every rank said hello by then
  double stop_grace_s = 300;        // after a stop request, how long the workers may take to save
  double kill_grace_s = 3;          // SIGTERM to mpirun, then SIGKILL after this
  double own_end_s = 0.5;           // after a rank died or went silent, mpirun may end the job itself
};

struct SupervisorSink {
  std::function<void(const control::StepMetrics&)> on_step;  // world rank 0's steps
  std::function<void(int64_t step, const std::string& path)> on_checkpoint;
  // An eval's progress from `rank`: its counts and its memory figures.
  std::function<void(int rank, const control::EvalCounts&, const control::StepMetrics& memory)> on_eval_progress;
  std::function<void(const std::string& metrics_json)> on_eval;
  std::function<void(const std::string& line)> message;  // the launcher's own news
};

JobResult supervise(JobProcess& job, control::Server& server, const SupervisorOptions& opt, const SupervisorSink& sink);

// "rank 1 (pid 4242 on node-b)".
std::string describe_rank(int rank, const RankState& r);

}  // namespace gt
