// Train configs are TOML files users write (and --section.key overrides they type): reading and
// validating one must end in the project's InputError or in a config; nothing else may escape
// (toml11's own exceptions, std::out_of_range from a number, ...).
//
// Lines "#override section.key=VALUE" (a TOML comment, so the file stays a config) are also
// applied as command-line overrides, which go through apply_override's own TOML parse.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/job_config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> overrides;
  std::istringstream lines(text);
  const std::string marker = "#override ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(marker, 0) != 0) continue;
    const std::string kv = line.substr(marker.size());
    const size_t eq = kv.find('=');
    overrides.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
  }
  for (gt::ConfigUse use : {gt::ConfigUse::kTrain, gt::ConfigUse::kEval}) {
    try {
      const gt::JobConfig c = gt::read_job_config_text(text, "fuzz.toml", overrides, use);
      FUZZ_CHECK(c.parallelism.dp > 0 && c.parallelism.pp > 0 && c.parallelism.tp > 0 && c.parallelism.microbatches > 0, "a layout that is not positive");
      FUZZ_CHECK(c.model.dim % c.model.n_heads == 0 && c.model.n_heads % c.model.n_kv_heads == 0, "heads that do not divide");
      FUZZ_CHECK(std::all_of(c.parallelism.partition.begin(), c.parallelism.partition.end(), [](int l) { return l >= 0; }),
                 "a negative first layer in the partition");
    } catch (const gt::InputError& e) {
      FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    }
  }
  return 0;
}
