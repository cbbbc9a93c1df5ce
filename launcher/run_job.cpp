#include "launcher/run_job.hpp"

#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.hpp"
#include "common/atomic_file.hpp"
#include "common/control_protocol.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "launcher/control_server.hpp"
#include "launcher/hostfile.hpp"
#include "launcher/job_process.hpp"
#include "launcher/job_supervisor.hpp"
#include "launcher/metrics_log.hpp"
#include "launcher/mpirun_command.hpp"
#include "launcher/progress_view.hpp"
#include "launcher/stop_signals.hpp"
#include "launcher/summary_table.hpp"
#include "launcher/tensorboard_writer.hpp"

extern char** environ;

namespace gt {

namespace {

double wall_time_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// The last lines of the workers' log: what mpirun and the ranks said before a failure.
std::string log_tail(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(f, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "    | " + l + "\n";
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// What the user sees and what the run folder records, fed by the supervisor's events.
struct RunView {
  std::string dir;
  bool append = false;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<ProgressView> progress;
  int64_t log_every = 10;
  int64_t last_step = 0, checkpoints = 0;
  double last_loss = 0, tokens_per_s_sum = 0;
  int64_t steps_seen = 0;
  std::string newest_checkpoint;
  std::vector<int64_t> skipped_steps;  // over every attempt

  RunView(const std::string& run_dir, bool append, int64_t every) : dir(run_dir), append(append), log_every(every) {}

  // Opened at the first event: a job that logs nothing (an evaluation, a rejected job) leaves
  // no empty files.
  MetricsLog& metrics() {
    if (!metrics_) metrics_ = std::make_unique<MetricsLog>(dir + "/metrics.jsonl", append);
    return *metrics_;
  }
  TensorBoardWriter& tensorboard() {
    if (!tensorboard_) tensorboard_ = std::make_unique<TensorBoardWriter>(dir + "/tensorboard");
    return *tensorboard_;
  }

  void say(const std::string& line) {
    if (progress) progress->message("graphtune: " + line);
    else std::fprintf(stdout, "graphtune: %s\n", line.c_str()), std::fflush(stdout);
  }

  SupervisorSink sink(int attempt) {
    SupervisorSink s;
    s.on_step = [this, attempt](const control::StepMetrics& m) {
      if (!progress) progress = std::make_unique<ProgressView>(stdout, ::isatty(1) != 0, m.steps, log_every);
      progress->on_step(m);
      const double t = wall_time_s();
      // A step the workers skipped ([training].on_nonfinite) comes without a gradient norm.
      const bool skipped = !std::isfinite(m.loss) || !std::isfinite(m.grad_norm);
      nlohmann::json record{{"step", m.step},   {"steps", m.steps},   {"loss", m.loss},
                            {"lr", m.lr},       {"grad_norm", m.grad_norm}, {"tokens_per_s", m.tokens_per_s},
                            {"rss_mib", m.rss_mib}, {"peak_rss_mib", m.peak_rss_mib}, {"time", t},
                            {"attempt", attempt}};
      if (skipped) {
        record["skipped"] = true;
        skipped_steps.push_back(m.step);
      }
      metrics().write(record);
      tensorboard().add_scalar("train/loss", m.step, m.loss, t);
      tensorboard().add_scalar("train/lr", m.step, m.lr, t);
      tensorboard().add_scalar("train/grad_norm", m.step, m.grad_norm, t);
      tensorboard().add_scalar("train/tokens_per_s", m.step, m.tokens_per_s, t);
      tensorboard().add_scalar("train/rss_mib", m.step, m.rss_mib, t);
      tensorboard().flush();  // TensorBoard shows the run live
      last_step = m.step;
      last_loss = m.loss;
      tokens_per_s_sum += m.tokens_per_s;
      ++steps_seen;
    };
    s.on_checkpoint = [this](int64_t step, const std::string& path) {
      metrics().write({{"event", "checkpoint"}, {"step", step}, {"path", path}, {"time", wall_time_s()}});
      newest_checkpoint = path;
      ++checkpoints;
      say("checkpoint at step " + std::to_string(step) + ": " + path);
    };
    s.on_eval = [this](const std::string& text) {
      nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) return;
      if (j.contains("accuracy") && j["accuracy"].is_number())
        say("eval: accuracy " + fixed(j["accuracy"].get<double>(), 4) +
            (j.contains("macro_f1") && j["macro_f1"].is_number() ? ", macro-F1 " + fixed(j["macro_f1"].get<double>(), 4)
                                                                    : ""));
    };
    s.message = [this](const std::string& line) { say(line); };
    return s;
  }

  void finish() {
    if (progress) progress->finish();
    if (tensorboard_) tensorboard_->flush();
  }
};

const char* status_of(int rank, const RankState& r, const JobResult& res) {
  if (r.stopped) return "stopped";
  if (r.done) return "done";
  if (!r.error.empty()) return "error";
  if (!r.said_hello) return "never connected";
  if (rank == res.failed_rank) return "failed";
  return "ended";  // by the launcher, after another rank failed
}

void print_summary(const std::string& title, const JobResult& res, const RunView& view) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [rank, r] : res.ranks)
    rows.push_back({std::to_string(rank), r.host.empty() ? "?" : r.host, std::to_string(r.local_rank), r.device,
                    status_of(rank, r, res), fixed(r.peak_rss_mib, 0)});
  std::string line = title + ": " + format_duration(res.seconds);
  if (view.steps_seen) {
    line += ", " + std::to_string(view.last_step) + " steps, loss " + fixed(view.last_loss, 4) + ", " +
            format_count(view.tokens_per_s_sum / static_cast<double>(view.steps_seen)) + " tokens/s";
  }
  if (view.checkpoints) line += ", newest checkpoint " + view.newest_checkpoint;
  std::fprintf(stdout, "graphtune: %s\n%s", line.c_str(),
               format_table({"rank", "host", "local rank", "device", "status", "peak RSS MiB"}, rows).c_str());
  if (!view.skipped_steps.empty()) {
    std::string steps;
    for (int64_t s : view.skipped_steps) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
    const size_t n = view.skipped_steps.size();
    std::fprintf(stdout, "graphtune: %zu step%s skipped (loss or gradients not finite): %s\n", n, n == 1 ? "" : "s",
                 steps.c_str());
  }
  const auto& d = res.drops;
  if (d.unauthenticated + d.oversized + d.malformed > 0)
    std::fprintf(stdout, "graphtune: control messages dropped: %lld unauthenticated, %lld oversized, %lld malformed\n",
                 static_cast<long long>(d.unauthenticated), static_cast<long long>(d.oversized),
                 static_cast<long long>(d.malformed));
  std::fflush(stdout);
}

}  // namespace

std::string worker_binary() {
  if (const char* env = std::getenv("GRAPHTUNE_WORKER")) return env;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) fail("/proc/self/exe", "cannot locate the graphtune binary");
  self[n] = 0;
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* rel : {"/graphtune-worker", "/../worker/graphtune-worker"}) {
    std::string p = dir + rel;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  fail(dir + "/graphtune-worker", "worker binary not found (set GRAPHTUNE_WORKER)");
}

std::vector<std::string> job_command(const JobSpec& spec, const LaunchFlags& flags) {
  // One rank on this host needs no mpirun: the worker runs as one process without MPI, and
  // starts faster (the control plane is the same).
  if (spec.layout.np == 1 && spec.layout.hostfile_text.empty() && flags.mpirun_args.empty()) {
    std::vector<std::string> argv{spec.worker};
    argv.insert(argv.end(), spec.worker_args.begin(), spec.worker_args.end());
    for (const auto& a : override_args(spec.layout.overrides)) argv.push_back(a);
    return argv;
  }
  MpirunSpec m;
  m.np = spec.layout.np;
  if (!spec.layout.hostfile_text.empty()) m.hostfile = spec.run_dir + "/logs/hostfile";
  m.oversubscribe = spec.layout.oversubscribe;
  m.per_host = spec.layout.per_host;
  m.export_env = {control::kAddressEnv, control::kTokenEnv, control::kHeartbeatEnv};
  // The tests' fault injection (a rank killed inside a checkpoint write) reaches the ranks on
  // every host, not only those mpirun starts here with its own environment.
  if (std::getenv("GRAPHTUNE_TEST_KILL_IN_SAVE")) m.export_env.push_back("GRAPHTUNE_TEST_KILL_IN_SAVE");
  m.extra = split_shell_words(flags.mpirun_args, "--mpirun-args");
  m.program = {spec.worker};
  m.program.insert(m.program.end(), spec.worker_args.begin(), spec.worker_args.end());
  for (const auto& a : override_args(spec.layout.overrides)) m.program.push_back(a);
  return mpirun_argv(m);
}

int preflight(const std::string& worker, const std::string& config, const JobLayout& layout) {
  std::vector<std::string> args{worker, "train", "--check-world", std::to_string(layout.np)};
  if (!config.empty()) args.insert(args.end(), {"--config", config});
  for (const auto& a : override_args(layout.overrides)) args.push_back(a);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, worker.c_str(), nullptr, nullptr, cargs.data(), environ) != 0)
    fail(worker, "cannot run the worker (set GRAPHTUNE_WORKER)");
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string resume_command(int argc, char** argv, const std::vector<std::string>& resume_args) {
  std::vector<std::string> a{"graphtune"};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--resume") {
      if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) ++i;  // its value
      continue;
    }
    if (s.rfind("--resume=", 0) == 0) continue;
    a.push_back(s);
  }
  a.insert(a.end(), resume_args.begin(), resume_args.end());
  return shell_command(a);
}

int run_job(const JobSpec& spec, const LaunchFlags& flags) {
  // The control port first: one that is taken fails here, before anything is written.
  std::string token;
  auto listen = [&] {
    token = control::random_token();
    return std::make_unique<control::Server>(flags.control_host, flags.control_port, token, "--control-port");
  };
  std::unique_ptr<control::Server> server = listen();
  // A job its workers reject leaves nothing behind: the folder goes again if this run made it.
  const bool made_run_dir = !path_exists(spec.run_dir);
  make_dirs(spec.run_dir + "/logs");
  const std::string log_path = spec.run_dir + "/logs/workers.log";
  RunView view(spec.run_dir, !spec.layout.cfg.resume.empty(), spec.layout.cfg.log_every);
  install_stop_signals();
  // On a terminal the progress bar owns the screen and the workers' output goes to the log
  // only; anywhere else (a pipe, a CI log) it is also passed through, as mpirun would.
  const bool echo = ::isatty(1) == 0;
  JobSpec job_spec = spec;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) {  // a fresh token: nothing of the failed attempt can talk to this one
      server.reset();   // first: a --control-port of the user's is free again
      server = listen();
    }
    ::setenv(control::kAddressEnv, server->address().c_str(), 1);
    ::setenv(control::kTokenEnv, token.c_str(), 1);
    ::setenv(control::kHeartbeatEnv, fixed(flags.heartbeat_s, 2).c_str(), 1);
    // When a rank dies, OpenMPI 4's mpirun ends the others with SIGCONT, a 1 s sleep, SIGTERM,
    // another 1 s sleep and SIGKILL, blocked the whole time: a failed job took over a second
    // to stop. The workers keep no state a SIGTERM could save (a graceful stop goes through the
    // control plane), so the signals go at once. A user's own setting stays.
    ::setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);
    if (!job_spec.layout.hostfile_text.empty()) {
      AtomicFile hf(job_spec.run_dir + "/logs/hostfile");
      hf.write(job_spec.layout.hostfile_text);
      hf.commit();
    }
    const std::vector<std::string> argv = job_command(job_spec, flags);
    {
      std::ofstream log(log_path, std::ios::app);
      log << "== graphtune " << job_spec.title << ", attempt " << attempt + 1 << ": " << shell_command(argv) << "\n";
    }
    view.say(job_spec.title + ": " + std::to_string(job_spec.layout.np) + " rank(s), control " + server->address() +
             ", log " + log_path);
    SupervisorOptions opt;
    opt.world = job_spec.layout.np;
    opt.heartbeat_timeout_s = flags.heartbeat_timeout_s;
    JobProcess job(argv, log_path, echo);
    JobResult res = supervise(job, *server, opt, view.sink(attempt));
    std::vector<long> local_pids;
    for (const auto& [rank, r] : res.ranks)
      if (r.said_hello && is_local_host(r.host)) local_pids.push_back(r.pid);
    kill_leftovers(local_pids, "graphtune-worker");
    view.finish();

    switch (res.outcome) {
      case JobOutcome::kFinished:
        print_summary(job_spec.title + " finished", res, view);
        return 0;
      case JobOutcome::kInputError: {
        std::string why = res.failure;
        for (const auto& [rank, r] : res.ranks)
          if (!r.error.empty()) {
            why = r.error;
            break;
          }
        // Passed through, the worker's own line has said it already.
        if (!echo) {
          if (why.empty()) std::fprintf(stderr, "%s", log_tail(log_path, 12).c_str());
          std::fprintf(stderr, "graphtune: error: %s\n", why.empty() ? "a worker rejected its input" : why.c_str());
        }
        if (made_run_dir) remove_tree(spec.run_dir);
        return kExitInputError;
      }
      case JobOutcome::kStopped: {
        print_summary(job_spec.title + " stopped", res, view);
        if (res.stopped_step > 0 && !spec.resume_command.empty())
          std::fprintf(stdout, "graphtune: saved at step %lld; to continue: %s\n",
                       static_cast<long long>(res.stopped_step), spec.resume_command.c_str());
        else
          std::fprintf(stdout, "graphtune: stopped before a checkpoint was saved\n");
        std::fflush(stdout);
        return 128 + (res.signal ? res.signal : SIGINT);
      }
      case JobOutcome::kFailed:
        break;
    }
    std::fprintf(stderr, "graphtune: error: %s; the job was stopped (exit %d)\n", res.failure.c_str(), res.mpirun.code);
    if (!echo) std::fprintf(stderr, "last lines of %s:\n%s", log_path.c_str(), log_tail(log_path, 12).c_str());
    print_summary(job_spec.title + " failed", res, view);
    if (attempt >= flags.max_restarts || !spec.checkpointed) return 1;
    const auto committed = ckpt::committed_checkpoints(job_spec.layout.cfg.checkpoint_dir);
    if (!committed.empty()) {
      set_override(job_spec.layout.overrides, "checkpoint.resume", "latest");
      view.say("restart " + std::to_string(attempt + 1) + " of " + std::to_string(flags.max_restarts) + " from " +
               committed.back());
    } else {
      view.say("restart " + std::to_string(attempt + 1) + " of " + std::to_string(flags.max_restarts) +
               " from the start (no committed checkpoint in " + job_spec.layout.cfg.checkpoint_dir + ")");
    }
  }
}

}  // namespace gt
