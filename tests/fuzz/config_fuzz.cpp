// Train configs are TOML files users write (and --section.key overrides they type): reading and
// validating one must end in the project's InputError or in a config; nothing else may escape
// (toml11's own exceptions, std::out_of_range from a number, ...).
//
// Lines "#override section.key=VALUE" (a TOML comment, so the file stays a config) are also
// applied as command-line overrides, which go through apply_override's own TOML parse.
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/train_config.hpp"
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
      const gt::TrainConfig c = gt::read_train_config_text(text, "fuzz.toml", overrides, use);
      FUZZ_CHECK(c.dp > 0 && c.pp > 0 && c.tp > 0 && c.microbatches > 0, "a layout that is not positive");
      FUZZ_CHECK(c.dim % c.n_heads == 0 && c.n_heads % c.n_kv_heads == 0, "heads that do not divide");
      FUZZ_CHECK(c.partition == "balanced" || !c.partition_layers.empty(), "an explicit partition without layers");
    } catch (const gt::InputError& e) {
      FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    }
  }
  return 0;
}
