#include "launcher/run_job.hpp"

#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/run_folder.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "control/control_protocol.hpp"
#include "control/control_server.hpp"
#include "launcher/hostfile.hpp"
#include "launcher/job_process.hpp"
#include "launcher/job_supervisor.hpp"
#include "launcher/mpirun_command.hpp"
#include "launcher/run_view.hpp"
#include "launcher/stop_signals.hpp"
#include "launcher/summary_table.hpp"

extern char** environ;

namespace gt {

namespace {

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

// One rank on this host needs no mpirun: the worker runs as one process without MPI, and starts
// faster (the control plane is the same).
bool runs_worker_alone(const JobSpec& spec, const LaunchFlags& flags) {
  return spec.layout.np == 1 && spec.layout.hostfile_text.empty() && flags.mpirun_args.empty();
}

const char* const kControlEnv[] = {control::kAddressEnv, control::kTokenEnv, control::kHeartbeatEnv};

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
  if (runs_worker_alone(spec, flags)) {
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
  m.export_env.assign(std::begin(kControlEnv), std::end(kControlEnv));
  // The tests' fault injection (a rank killed inside a checkpoint write) reaches the ranks on
  // every host, not only those mpirun starts here with its own environment.
  for (const char* hook : {"GRAPHTUNE_TEST_KILL_IN_SAVE", "GRAPHTUNE_TEST_KILL_IN_EVAL", "GRAPHTUNE_TEST_EVAL_SLOW_MS"})
    if (std::getenv(hook)) m.export_env.push_back(hook);
  m.extra = split_shell_words(flags.mpirun_args, "--mpirun-args");
  m.program = {spec.worker};
  m.program.insert(m.program.end(), spec.worker_args.begin(), spec.worker_args.end());
  for (const auto& a : override_args(spec.layout.overrides)) m.program.push_back(a);
  return mpirun_argv(m);
}

std::string dry_run_text(const JobSpec& spec, const LaunchFlags& flags) {
  std::string text;
  if (!spec.layout.hostfile_text.empty()) {
    text += "# " + spec.run_dir + "/logs/hostfile, which the launcher writes before it starts mpirun:\n";
    std::istringstream lines(spec.layout.hostfile_text);
    for (std::string line; std::getline(lines, line);) text += "#   " + line + "\n";
  }
  text += shell_command(job_command(spec, flags));
  if (!runs_worker_alone(spec, flags)) {
    std::string names;
    for (const char* name : kControlEnv) names += (names.empty() ? "" : ", ") + std::string(name);
    text += "  # " + names + ": set by the launcher for each attempt (run by hand, without them, the ranks train "
            "unsupervised)";
  }
  return text + "\n";
}

int preflight(const std::string& worker, const std::string& config, const JobLayout& layout,
              const std::string& subcommand) {
  std::vector<std::string> args{worker, subcommand, "--check-world", std::to_string(layout.np)};
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
  // A job its workers reject leaves nothing behind: the folder goes again if this run made it
  // and nothing in it was committed.
  const bool made_run_dir = !path_exists(spec.run_dir);
  const RunFolderLock lock(spec.run_dir, "graphtune " + spec.title);  // one job a folder
  lock.say_taken_over(stdout);
  const JobConfig& cfg = spec.layout.cfg;
  const std::string checkpoint_dir = spec.checkpointed ? cfg.checkpoint.dir : "";
  if (spec.checkpointed) {
    check_run_folder(spec.run_dir, checkpoint_dir, !cfg.checkpoint.resume.empty(), cfg.job.overwrite);
    if (cfg.job.overwrite && cfg.checkpoint.resume.empty()) clear_run_folder(spec.run_dir, checkpoint_dir);
  }
  make_dirs(spec.run_dir + "/logs");
  const std::string log_path = spec.run_dir + "/logs/workers.log";
  const bool continues = !cfg.checkpoint.resume.empty() || (spec.answers && cfg.eval.resume);
  RunView view(spec.run_dir, continues, spec.layout.cfg.training.log_every);
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
    ::setenv(control::kHeartbeatEnv, format_fixed(flags.heartbeat_s, 2).c_str(), 1);
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
        view.print_summary(job_spec.title + " finished", res);
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
        if (made_run_dir) remove_uncommitted_run(spec.run_dir, checkpoint_dir, view.saw_steps());
        return kExitInputError;
      }
      case JobOutcome::kStopped: {
        view.print_summary(job_spec.title + " stopped", res);
        if (spec.answers && !spec.resume_command.empty())
          std::fprintf(stdout, "graphtune: %lld of %lld records answered and committed; to continue: %s\n",
                       static_cast<long long>(view.eval_answered()), static_cast<long long>(view.eval_records()),
                       spec.resume_command.c_str());
        else if (res.stopped_step > 0 && !spec.resume_command.empty())
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
    view.print_summary(job_spec.title + " failed", res);
    if (attempt >= flags.max_restarts || !(spec.checkpointed || spec.answers)) return 1;
    if (spec.answers) {
      set_override(job_spec.layout.overrides, "eval.resume", "true");
      view.say("restart " + std::to_string(attempt + 1) + " of " + std::to_string(flags.max_restarts) + ", keeping the " +
               std::to_string(view.eval_answered()) + " answers committed");
      continue;
    }
    const auto committed = ckpt::committed_checkpoints(job_spec.layout.cfg.checkpoint.dir);
    if (!committed.empty()) {
      set_override(job_spec.layout.overrides, "checkpoint.resume", "latest");
      view.say("restart " + std::to_string(attempt + 1) + " of " + std::to_string(flags.max_restarts) + " from " +
               committed.back());
    } else {
      view.say("restart " + std::to_string(attempt + 1) + " of " + std::to_string(flags.max_restarts) +
               " from the start (no committed checkpoint in " + job_spec.layout.cfg.checkpoint.dir + ")");
    }
  }
}

}  // namespace gt
