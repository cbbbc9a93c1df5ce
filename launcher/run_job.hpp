#pragma once
// One job under the launcher: the control server, mpirun, the supervisor, what the user sees
// (progress, metrics.jsonl, TensorBoard events, the summary), and restarts from the newest
// committed checkpoint after a failure. Returns the launcher's exit code.
#include <string>
#include <vector>

#include "launcher/job_layout.hpp"

namespace gt {

struct JobSpec {
  std::string title;                  // "train", "pipeline stage1", ...
  std::string worker;                 // the graphtune-worker binary
  std::vector<std::string> worker_args;  // its subcommand and arguments, overrides excluded
  JobLayout layout;
  std::string run_dir;                // metrics.jsonl, tensorboard/, logs/ go here
  bool checkpointed = false;          // train: a restart resumes from [checkpoint].dir
  bool answers = false;               // eval: a restart continues from the answers committed
  std::string resume_command;         // what the user runs to continue after a stop ("" = none)
};

int run_job(const JobSpec& spec, const LaunchFlags& flags);

// The mpirun command run_job would run, without starting anything.
std::vector<std::string> job_command(const JobSpec& spec, const LaunchFlags& flags);

// What --dry-run prints for the job: that command as one line a shell reads back, after the
// hostfile it names (which the launcher writes only when it runs the job), as comment lines;
// under mpirun the line ends in a comment naming the variables the launcher sets for each
// attempt (its control plane's address, a fresh token, the heartbeat), which `-x` passes on.
std::string dry_run_text(const JobSpec& spec, const LaunchFlags& flags);

// The graphtune-worker binary beside this one (or $GRAPHTUNE_WORKER).
std::string worker_binary();

// The worker checks the config and the layout for the whole world in one process, without
// MPI, before any rank starts: a bad file or a layout the model cannot take costs a second,
// not a job. Returns its exit code; its one-line error is the user's.
// `subcommand`: the worker's train or eval, whose checks differ.
int preflight(const std::string& worker, const std::string& config, const JobLayout& layout,
              const std::string& subcommand = "train");

// The command line that continues a stopped run: this process's own, without its --resume,
// with `resume_args` appended.
std::string resume_command(int argc, char** argv, const std::vector<std::string>& resume_args);

}  // namespace gt
