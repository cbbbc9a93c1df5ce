// GraphGPT instruction files come from users and other tools: reading one must end in the
// project's InputError or in records that pass validation, that instructions_json writes and
// that read back the same; strict and skip_invalid reading must agree on what is valid.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/instructions.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

bool same_records(const std::vector<gt::InstructionRecord>& a, const std::vector<gt::InstructionRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].dataset != b[i].dataset || a[i].graphs.size() != b[i].graphs.size() ||
        a[i].conversations.size() != b[i].conversations.size())
      return false;
    for (size_t g = 0; g < a[i].graphs.size(); ++g) {
      const gt::GraphRef &x = a[i].graphs[g], &y = b[i].graphs[g];
      if (x.node_idx != y.node_idx || x.node_list != y.node_list || x.edge_index != y.edge_index) return false;
    }
    for (size_t t = 0; t < a[i].conversations.size(); ++t)
      if (a[i].conversations[t].from != b[i].conversations[t].from ||
          a[i].conversations[t].value != b[i].conversations[t].value)
        return false;
  }
  return true;
}

// An InputError from checking records that were read is a bug of its own (a record accepted that
// its writer or its text-only view refuses), reported as such rather than as a refusal of the file.
template <typename Check>
void expect_no_input_error(const Check& check, const char* what) {
  try {
    check();
  } catch (const gt::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    FUZZ_CHECK(false, what);
  }
}

// Records that were read are valid: they are written, read back unchanged, and their
// text-only views validate too.
void check_records(const std::vector<gt::InstructionRecord>& records) {
  FUZZ_CHECK(!records.empty(), "a read that returned no record");
  expect_no_input_error(
      [&] {
        const std::string text = gt::instructions_json(records, "fuzz-out.json");
        FUZZ_CHECK(same_records(records, gt::read_instructions_text(text, "fuzz-out.json")),
                   "records written and read back differ");
      },
      "records that were read cannot be written and read back");
  for (const gt::InstructionRecord& r : records)
    expect_no_input_error([&] { gt::validate_instruction(gt::text_only_record(r), "fuzz-text-only"); },
                          "a record that was read has an invalid text-only view");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  bool strict_ok = false;
  std::vector<gt::InstructionRecord> strict;
  try {
    strict = gt::read_instructions_text(text, "fuzz.json");
    strict_ok = true;
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
  }
  if (strict_ok) check_records(strict);
  gt::InstructionReadOptions options;
  options.skip_invalid = true;
  gt::InstructionReadReport report;
  std::vector<gt::InstructionRecord> kept;
  try {
    kept = gt::read_instructions_text(text, "fuzz.json", options, &report);
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(!strict_ok, "skip_invalid refused a file strict reading accepted");
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    return 0;
  }
  FUZZ_CHECK(report.total == static_cast<int64_t>(kept.size()) + report.skipped, "total != kept + skipped");
  FUZZ_CHECK(!strict_ok || (report.skipped == 0 && kept.size() == strict.size()),
             "skip_invalid dropped records that strict reading accepted");
  check_records(kept);
  return 0;
}
