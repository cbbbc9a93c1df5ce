#pragma once
// The mpirun command line the launcher runs (and prints with --dry-run). Everything about how
// OpenMPI is asked to start the ranks is here; what each rank runs is `program`.
#include <string>
#include <vector>

namespace gt {

// Ranks on one host with the devices they may see: a --include/--exclude slot list picks GPUs,
// which OpenMPI's hostfile cannot say, so each such host gets an app context of its own with
// CUDA_VISIBLE_DEVICES (DeepSpeed's way); local rank i then uses the i-th device listed.
struct HostRanks {
  std::string host;
  int np = 0;
  std::string visible_devices;  // "0,2"
};

struct MpirunSpec {
  int np = 1;
  std::string hostfile;                 // an OpenMPI hostfile; "" = every rank on this host
  bool oversubscribe = false;           // more ranks on this host than it has cores
  std::vector<std::string> export_env;  // variables passed to every rank (-x NAME: the value stays
                                        // out of the command line, which `ps` shows to everyone)
  std::vector<std::string> extra;       // the user's own mpirun arguments (--mpirun-args), verbatim
  std::vector<std::string> program;     // the worker and its arguments
  std::vector<HostRanks> per_host;      // non-empty: one app context per host (np is their sum)
};

std::vector<std::string> mpirun_argv(const MpirunSpec& spec);

// One line a POSIX shell reads back as `argv` (single quotes where needed).
std::string shell_command(const std::vector<std::string>& argv);

// Splits `text` at whitespace, honouring single and double quotes (for --mpirun-args).
std::vector<std::string> split_shell_words(const std::string& text, const std::string& where);

}  // namespace gt
