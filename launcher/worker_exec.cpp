// Subcommands that need libtorch run in graphtune-worker; the launcher replaces itself with
// the worker so that exit codes, signals and stdout pass straight through.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/commands.hpp"
#include "launcher/run_job.hpp"

namespace gt {

[[noreturn]] static void exec_worker(const std::string& sub, int argc, char** argv) {
  std::string path = worker_binary();
  std::vector<std::string> args{path};
  // Everything after the subcommand name goes to the worker unchanged.
  int i = 1;
  while (i < argc && sub != argv[i]) ++i;
  args.push_back(sub);
  for (++i; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  ::execv(path.c_str(), cargs.data());
  fail(path, std::string("cannot run the worker: ") + std::strerror(errno));
}

void add_worker_commands(CLI::App& app, int& /*exit_code*/, int argc, char** argv) {
  struct Sub { const char* name; const char* help; };
  static const Sub subs[] = {
      {"generate", "generate text from a llama2.c file or a Hugging Face folder"},
      {"convert", "convert a llama2.c, GGUF or Hugging Face model into a Hugging Face folder, with its tokenizer"},
      {"export", "write a training checkpoint as a Hugging Face folder or GraphGPT's stage files"},
  };
  for (const auto& s : subs) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    sub->allow_extras();
    sub->set_help_flag();  // --help goes to the worker, which knows the flags
    std::string name = s.name;
    sub->callback([name, argc, argv] { exec_worker(name, argc, argv); });
  }
}

}  // namespace gt
