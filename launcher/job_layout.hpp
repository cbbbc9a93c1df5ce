#pragma once
// From the user's launch flags and job config to what mpirun starts: how many ranks, on which
// hosts, and the worker's final overrides. Everything here is checked before anything starts;
// each problem is one line naming the flag, the file or the key.
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.hpp"
#include "launcher/mpirun_command.hpp"

namespace gt {

struct LaunchFlags {
  std::string config;                 // -c
  std::vector<std::string> extra;     // --section.key VALUE overrides, passed on to the workers
  int np = 0, dp = 0, pp = 0, tp = 0; // 0: not given
  std::string schedule;
  int microbatches = 0;
  std::string device;                 // --device: = --training.device ("" = not given)
  std::string hostfile, include, exclude;
  std::string mpirun_args;
  std::string control_host = "127.0.0.1";
  int control_port = 0;               // 0: any free port
  double heartbeat_s = 2, heartbeat_timeout_s = 30;
  int max_restarts = 0;
  bool dry_run = false;
  bool overwrite = false;  // --overwrite: = --job.overwrite true
};

using Overrides = std::vector<std::pair<std::string, std::string>>;

struct JobLayout {
  int np = 1;
  JobConfig cfg;          // read with the final overrides
  Overrides overrides;      // the user's, the parallelism flags', and the thread count
  std::string hostfile;     // the user's hostfile, as given ("" = this host)
  std::string hostfile_text;  // the OpenMPI hostfile mpirun gets (filtered by --include/--exclude)
  // When a slot list chose devices: how many ranks go to each host and which devices they see.
  std::vector<HostRanks> per_host;
  int ranks_per_host = 1;
  bool oversubscribe = false;
};

// use: kTrain for train and the pipeline's stages, kEval for eval. A count flag of 0 is
// one not given: the CLI has refused the ones given as less than 1.
JobLayout resolve_layout(const LaunchFlags& flags, const Overrides& user_overrides, ConfigUse use);

// The worker's `--section.key VALUE` arguments.
std::vector<std::string> override_args(const Overrides& overrides);

// Replaces (or adds) one override.
void set_override(Overrides& overrides, const std::string& key, const std::string& value);

}  // namespace gt
