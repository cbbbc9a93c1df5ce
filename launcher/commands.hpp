#pragma once
// Each subcommand of the `graphtune` CLI registers itself on the app; the one that ran sets
// the exit code through the callback it installs.
#include <CLI/CLI.hpp>

namespace gt {

// Subcommands the launcher serves itself (no libtorch).
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_data_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);  // memory per GPU per layout (plan_command.cpp)

// train, eval and pipeline: jobs the launcher runs under mpirun and supervises
// (launcher/launch_command.cpp). argc/argv: the command line that resumes a stopped run.
void add_launch_commands(CLI::App& app, int& exit_code, int argc, char** argv);

// Subcommands that run in graphtune-worker: the arguments are passed through unchanged.
void add_worker_commands(CLI::App& app, int& exit_code, int argc, char** argv);

}  // namespace gt
