// graphtune: the user's command line.
#include <cstdio>

#include "common/cli_errors.hpp"
#include "common/error.hpp"
#include "launcher/commands.hpp"

static int launcher_main(int argc, char** argv) {
  CLI::App app{"graphtune: GraphGPT-style graph instruction tuning, multi-process"};
  app.require_subcommand(1);
  int exit_code = 0;
  gt::add_worker_commands(app, exit_code, argc, argv);
  gt::add_launch_commands(app, exit_code, argc, argv);
  gt::add_tokenize_command(app, exit_code);
  gt::add_data_command(app, exit_code);
  gt::add_plan_command(app, exit_code);
  int rc = gt::parse_command_line(app, argc, argv);
  return rc >= 0 ? rc : exit_code;
}

int main(int argc, char** argv) { return gt::run_main("graphtune", launcher_main, argc, argv); }
