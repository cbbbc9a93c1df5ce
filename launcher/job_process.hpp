#pragma once
// The mpirun child of the launcher. It runs in a process group of its own, so that Ctrl-C at
// the terminal reaches only the launcher (which asks the workers to save and stop instead of
// letting mpirun kill them mid-step), and so that the launcher can end everything it started
// with one signal to the group. It dies with the launcher (PR_SET_PDEATHSIG): a launcher killed
// with -9 leaves no job behind.
#include <sys/types.h>

#include <atomic>
#include <optional>
#include <thread>
#include <string>
#include <vector>

namespace gt {

struct ExitStatus {
  int code = 0;    // exit code, or 128 + signal when killed (the shell's convention)
  int signal = 0;  // the signal that ended it, or 0
};

class JobProcess {
 public:
  // Starts argv[0] (searched in PATH) with argv. Its stdout and stderr are appended to
  // `log_path` and, with `echo`, copied to the launcher's stderr as they come (a terminal with
  // a progress bar gets only the log file; a pipe or a CI log gets both).
  JobProcess(const std::vector<std::string>& argv, const std::string& log_path, bool echo);
  ~JobProcess();  // a job still running is terminated
  JobProcess(const JobProcess&) = delete;
  JobProcess& operator=(const JobProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit status once it has ended; empty while it runs (never blocks).
  std::optional<ExitStatus> poll();
  // SIGTERM to the whole group; after grace_s, SIGKILL to what is left. Returns its status.
  ExitStatus terminate(double grace_s);

 private:
  void finish_output();
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  std::thread copier_;
  std::atomic<bool> exited_{false};
};

// Sends SIGKILL to each pid that is still alive and was one of this job's (its command line
// names `marker`), and waits (up to wait_s) until they have ended. The local workers' pids come
// from their hello; a worker whose mpirun daemon was killed before it could reap it must not
// live on. mpirun gives each rank a process group of its own, so the signal to mpirun's group
// does not reach them.
void kill_leftovers(const std::vector<long>& pids, const std::string& marker, double wait_s = 5.0);

}  // namespace gt
