#pragma once
// CLI11 prints usage errors over two lines ("...\nRun with --help for more information.").
// graphtune's rule is one line and exit code 2 for every input error, --help stays exit 0.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/error.hpp"

namespace gt {

inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  bool known = false;
  if (argc > 1)
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) known |= sub->check_name(argv[1]);
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "graphtune: error: unknown subcommand '%s' (see --help)\n", argv[1]);
    return kExitInputError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "graphtune: error: %s (see --help)\n", e.what());
    return kExitInputError;
  }
  return -1;  // parsed; the subcommand's callback ran
}

}  // namespace gt
