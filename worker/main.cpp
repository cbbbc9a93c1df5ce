// graphtune-worker: the per-rank program. Every subcommand that needs libtorch runs here.
#include <string>
#include <vector>

#include "common/cli_errors.hpp"
#include "common/error.hpp"
#include "worker/commands.hpp"

static int worker_main(int argc, char** argv) {
  // `graphtune-worker -c CONFIG ...` trains: the form a hand-written mpirun line uses.
  std::vector<char*> args(argv, argv + argc);
  static char train[] = "train";
  if (argc > 1 && (std::string(argv[1]) == "-c" || std::string(argv[1]) == "--config"))
    args.insert(args.begin() + 1, train);
  argc = static_cast<int>(args.size());
  argv = args.data();
  CLI::App app{"graphtune-worker: the per-rank program of graphtune"};
  app.require_subcommand(1);
  int exit_code = 0;
  gt::add_generate_command(app, exit_code);
  gt::add_train_command(app, exit_code);
  gt::add_eval_command(app, exit_code);
  gt::add_convert_commands(app, exit_code);
  gt::add_export_command(app, exit_code);
  int rc = gt::parse_command_line(app, argc, argv);
  return rc >= 0 ? rc : exit_code;
}

int main(int argc, char** argv) { return gt::run_main("graphtune", worker_main, argc, argv); }
