#pragma once
// The mpirun command line the launcher runs (and prints with --dry-run). Everything about how
// OpenMPI is asked to start the ranks is here; what each rank runs is `program`.
#include <string>
#include <vector>

namespace gt {

struct MpirunSpec {
  int np = 1;
  std::string hostfile;                 // an OpenMPI hostfile; "" = every rank on this host
  bool oversubscribe = false;           // more ranks on this host than it has cores
  std::vector<std::string> export_env;  // variables passed to every rank (-x NAME: the value stays
                                        // out of the command line, which `ps` shows to everyone)
  std::vector<std::string> extra;       // the user's own mpirun arguments (--mpirun-args), verbatim
  std::vector<std::string> program;     // the worker and its arguments
};

std::vector<std::string> mpirun_argv(const MpirunSpec& spec);

// One line a POSIX shell reads back as `argv` (single quotes where needed).
std::string shell_command(const std::vector<std::string>& argv);

// Splits `text` at whitespace, honouring single and double quotes (for --mpirun-args).
std::vector<std::string> split_shell_words(const std::string& text, const std::string& where);

}  // namespace gt
