#include "launcher/mpirun_command.hpp"

#include <unistd.h>

#include "common/error.hpp"

namespace gt {

std::vector<std::string> mpirun_argv(const MpirunSpec& spec) {
  std::vector<std::string> a{"mpirun", "-np", std::to_string(spec.np)};
  if (::geteuid() == 0) a.push_back("--allow-run-as-root");  // OpenMPI refuses root without it
  if (!spec.hostfile.empty()) a.insert(a.end(), {"--hostfile", spec.hostfile});
  if (spec.oversubscribe) a.push_back("--oversubscribe");
  // OpenMPI binds each rank to one core when np <= 2: a rank's intra-op threads would then share
  // that core. The worker sets its own thread count ([training].threads) for the cores it has.
  a.insert(a.end(), {"--bind-to", "none"});
  a.insert(a.end(), spec.extra.begin(), spec.extra.end());
  if (spec.per_host.empty()) {
    for (const auto& name : spec.export_env) a.insert(a.end(), {"-x", name});
    a.insert(a.end(), spec.program.begin(), spec.program.end());
    return a;
  }
  a.erase(a.begin() + 1, a.begin() + 3);  // each context has its own -np
  for (size_t i = 0; i < spec.per_host.size(); ++i) {
    const HostRanks& h = spec.per_host[i];
    if (i > 0) a.push_back(":");
    a.insert(a.end(), {"-np", std::to_string(h.np), "--host", h.host + ":" + std::to_string(h.np)});
    // -x belongs to the app context it is given in: every context repeats it.
    for (const auto& name : spec.export_env) a.insert(a.end(), {"-x", name});
    a.insert(a.end(), {"-x", "CUDA_VISIBLE_DEVICES=" + h.visible_devices});
    a.insert(a.end(), spec.program.begin(), spec.program.end());
  }
  return a;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty();
    for (char c : a)
      if (!(isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,@%+").find(c) != std::string::npos))
        plain = false;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::vector<std::string> split_shell_words(const std::string& text, const std::string& where) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) fail(where, "unterminated quote in '" + text + "'");
  if (in_word) words.push_back(cur);
  return words;
}

}  // namespace gt
