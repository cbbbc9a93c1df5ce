#include "loader/job_records.hpp"

#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "common/error.hpp"

namespace gt {

namespace {

void report_skipped(const std::string& file, const char* why, int64_t skipped, int64_t total,
                    const std::vector<std::string>& first) {
  if (skipped == 0) return;
  std::string reasons;
  for (const auto& r : first) reasons += (reasons.empty() ? "" : " | ") + r;
  std::fprintf(stderr, "graphtune: --skip-invalid: dropped %lld of %lld records of %s (%s); first: %s\n",
               static_cast<long long>(skipped), static_cast<long long>(total), file.c_str(), why, reasons.c_str());
}

}  // namespace

std::vector<InstructionRecord> read_job_records(const DataSection& data) {
  InstructionReadOptions opts;
  opts.skip_invalid = data.skip_invalid;
  opts.max_reasons = 3;
  InstructionReadReport rep;
  auto records = read_instructions(data.instructions, opts, &rep);
  report_skipped(data.instructions, "invalid", rep.skipped, rep.total, rep.first_reasons);
  return records;
}

void check_records_against_features(std::vector<InstructionRecord>& records, const FeatureTable& features,
                                    const DataSection& data) {
  const size_t total = records.size();
  std::vector<InstructionRecord> kept;
  kept.reserve(total);
  std::vector<std::string> first;
  for (auto& r : records) {
    try {
      const std::string where = data.instructions + ": record " + r.id;
      check_node_ids(r, features.of(r.dataset, where).size(0), data.instructions);
      kept.push_back(std::move(r));
    } catch (const InputError& e) {
      if (!data.skip_invalid) throw;
      if (first.size() < 3) first.push_back(e.what());
    }
  }
  const int64_t dropped = static_cast<int64_t>(total - kept.size());
  if (kept.empty())
    fail(data.instructions, "no record left after dropping " + std::to_string(dropped) +
                               " whose nodes are not in the feature tables (first: " + first[0] + ")");
  report_skipped(data.instructions, "nodes outside the feature tables", dropped, static_cast<int64_t>(total), first);
  records = std::move(kept);
}

}  // namespace gt
