// Train configs are TOML files users write (and --section.key overrides they type): reading and
// validating one must end in the project's InputError or in a config; nothing else may escape
// (toml11's own exceptions, std::out_of_range from a number, ...).
//
// Lines "#override section.key=VALUE" (a TOML comment, so the file stays a config) are also
// applied as command-line overrides, which go through apply_override's own TOML parse.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/job_config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

// Whether the text (or an override in it) spells an int64 limit itself, in any of TOML's forms.
bool spells_an_int64_limit(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char* limit : {"9223372036854775807", "9223372036854775808", "0x7fffffffffffffff", "0o777777777777777777777",
                            "0b111111111111111111111111111111111111111111111111111111111111111"})
    if (text.find(limit) != std::string::npos) return true;
  return false;
}

}  // namespace

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
      // What the code keeps in fewer bits is within their range.
      const auto& p = c.parallelism;
      FUZZ_CHECK(p.dp <= (1 << 20) && p.pp <= (1 << 20) && p.tp <= (1 << 20) && p.microbatches <= (1 << 20),
                 "a layout axis beyond its range");
      FUZZ_CHECK(c.data.nodes <= INT32_MAX && c.data.classes <= INT32_MAX && c.training.epochs <= INT32_MAX &&
                     c.checkpoint.keep_latest <= INT32_MAX && c.training.threads <= 4096 && c.data.num_workers <= 4096,
                 "a count beyond its range");
      // An integer literal beyond int64 is refused, not read as the limit toml11 saturates it to:
      // a value at a limit must have been written as that limit.
      for (int64_t v : {c.training.steps, c.training.seed, c.data.seed, c.checkpoint.every, c.training.log_every,
                        c.training.max_skipped_in_a_row, c.eval.max_new_tokens, c.eval.batch_size, c.data.max_len,
                        c.training.batch_size, c.training.seq_len, c.training.grad_accum_steps})
        if (v == INT64_MAX || v == INT64_MIN) FUZZ_CHECK(spells_an_int64_limit(text), "an integer beyond int64 accepted");
    } catch (const gt::InputError& e) {
      FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    }
  }
  return 0;
}
