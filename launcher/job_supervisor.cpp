#include "launcher/job_supervisor.hpp"

#include <csignal>
#include <cstring>

#include "launcher/stop_signals.hpp"

namespace gt {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

}  // namespace

// A heartbeat's or a step's memory figures: the current RSS, and the peaks kept at their highest.
void note_memory(RankState& r, const control::StepMetrics& m) {
  r.rss_mib = m.rss_mib;
  r.peak_rss_mib = std::max(r.peak_rss_mib, m.peak_rss_mib);
  r.gpu_peak_allocated_mib = std::max(r.gpu_peak_allocated_mib, m.gpu_peak_allocated_mib);
  r.gpu_peak_reserved_mib = std::max(r.gpu_peak_reserved_mib, m.gpu_peak_reserved_mib);
}

std::string describe_rank(int rank, const RankState& r) {
  std::string s = "rank " + std::to_string(rank);
  if (r.said_hello) s += " (pid " + std::to_string(r.pid) + " on " + r.host + ")";
  return s;
}

JobResult supervise(JobProcess& job, control::Server& server, const SupervisorOptions& opt, const SupervisorSink& sink) {
  JobResult res;
  const auto start = Clock::now();
  const int signals_before = stop_signal_count();
  bool stop_sent = false;
  Clock::time_point stop_at;
  std::string failure;  // the first failure seen: the cause (what follows is its consequence)
  auto fail_job = [&](const std::string& why, int rank) {
    if (!failure.empty()) return;
    failure = why;
    res.failed_rank = rank;
  };

  auto on_event = [&](const control::Event& e) {
    RankState& r = res.ranks[e.rank];
    if (e.kind == control::Event::Kind::kDisconnected) {
      r.disconnected = true;
      if (!r.done && !stop_sent)
        fail_job(describe_rank(e.rank, r) + " exited without finishing" +
                 (r.error.empty() ? " (killed or crashed)" : ": " + r.error),
                 e.rank);
      return;
    }
    const control::WorkerMessage& m = e.message;
    switch (m.kind) {
      case control::Kind::kHello:
        r.said_hello = true;
        r.host = m.hello.host;
        r.device = m.hello.device;
        r.local_rank = m.hello.local_rank;
        r.pid = static_cast<long>(m.hello.pid);
        break;
      case control::Kind::kDevice:
        r.device = m.text;
        break;
      case control::Kind::kHeartbeat:
        note_memory(r, m.metrics);
        break;
      case control::Kind::kStep:
        note_memory(r, m.metrics);
        if (sink.on_step) sink.on_step(m.metrics);
        break;
      case control::Kind::kCheckpoint:
        if (sink.on_checkpoint) sink.on_checkpoint(m.step, m.text);
        break;
      case control::Kind::kEvalProgress:
        note_memory(r, m.metrics);
        if (sink.on_eval_progress) sink.on_eval_progress(e.rank, m.eval, m.metrics);
        break;
      case control::Kind::kEval:
        if (sink.on_eval) sink.on_eval(m.text);
        break;
      case control::Kind::kError:
        r.error = m.text;
        fail_job(describe_rank(e.rank, r) + " failed: " + m.text, e.rank);
        break;
      case control::Kind::kStopped:
        r.stopped = true;
        res.stopped_step = m.step;
        break;
      case control::Kind::kDone:
        r.done = true;
        break;
    }
  };

  std::optional<ExitStatus> status;
  std::optional<Clock::time_point> failed_at;
  while (!(status = job.poll())) {
    server.poll_for(std::chrono::milliseconds(100), on_event);
    const auto now = Clock::now();
    const int signals = stop_signal_count() - signals_before;
    if (signals >= 1 && !stop_sent) {
      stop_sent = true;
      stop_at = now;
      res.signal = last_stop_signal();
      server.request_stop(signal_name(res.signal));
      if (sink.message)
        sink.message(std::string(signal_name(res.signal)) +
                     ": the workers finish this step, save a checkpoint and stop (again to end them now)");
    }
    if (signals >= 2 || (stop_sent && seconds_between(stop_at, now) > opt.stop_grace_s)) {
      if (sink.message) sink.message("ending the job now");
      status = job.terminate(opt.kill_grace_s);
      break;
    }
    if (!stop_sent) {
      // Silence: a stopped (SIGSTOP), swapped-out or wedged process sends no heartbeat.
      for (const auto& [rank, heard] : server.last_heard()) {
        RankState& r = res.ranks[rank];
        if (!r.done && !r.disconnected && seconds_between(heard, now) > opt.heartbeat_timeout_s) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%.0f s", opt.heartbeat_timeout_s);
          fail_job(describe_rank(rank, r) + " sent no heartbeat for " + buf + " (stalled or unreachable)", rank);
        }
      }
      if (seconds_between(start, now) > opt.startup_timeout_s) {
        std::string missing;
        for (int rank = 0; rank < opt.world; ++rank)
          if (!res.ranks[rank].said_hello) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
        if (!missing.empty())
          fail_job("rank(s) " + missing + " never connected to the launcher within " +
                   std::to_string(static_cast<int>(opt.startup_timeout_s)) + " s",
                   -1);
      }
    }
    if (!failure.empty()) {
      // A rank that reported an error ends the job itself (MPI_Abort) in a moment. mpirun
      // notices a dead rank and ends the rest itself, and OpenMPI 4.1's mpirun crashes in
      // PMIx_Finalize when a SIGTERM comes while it does: it gets a moment first. A silent
      // rank it never notices, and it may wait for a dead one: then end it now.
      if (!failed_at) failed_at = now;
      bool reported = false;
      for (const auto& [rank, r] : res.ranks) reported = reported || !r.error.empty();
      const double waited = seconds_between(*failed_at, now);
      if ((!reported && waited > opt.own_end_s) || waited > 5) {
        status = job.terminate(opt.kill_grace_s);
        break;
      }
    }
  }
  // The last events (a rank's error, the others' goodbyes) may still be in flight.
  server.poll_for(std::chrono::milliseconds(200), on_event);
  res.mpirun = *status;
  res.drops = server.drops();
  res.seconds = seconds_between(start, Clock::now());
  if (stop_sent) {
    res.outcome = JobOutcome::kStopped;
  } else if (status->code == 0 && failure.empty()) {
    res.outcome = JobOutcome::kFinished;
  } else if (status->code == 2) {
    res.outcome = JobOutcome::kInputError;
    res.failure = failure;
  } else {
    res.outcome = JobOutcome::kFailed;
    res.failure = failure;
    if (failure.empty()) {
      // Every rank said done and then one died on its way out (a kill -9 a moment late, a
      // crash in MPI_Finalize): the work is whole, yet mpirun reports the death.
      bool all_done = opt.world > 0;
      for (int rank = 0; rank < opt.world; ++rank) all_done = all_done && res.ranks[rank].done;
      res.failure = "mpirun exited with code " + std::to_string(status->code) +
                    (all_done ? " after every rank reported done (a rank was killed or crashed as it exited)" : "");
    }
  }
  return res;
}

}  // namespace gt
