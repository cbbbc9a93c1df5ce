#pragma once
// A job's instruction records ([data].instructions), read and checked whole before any weight
// is: every record is validated, then checked against the node-feature tables. A bad record is
// an InputError naming the file, the record and the field; with [data].skip_invalid
// (`--skip-invalid`) it is dropped instead, and one line reports how many were and why the
// first ones were.
#include <vector>

#include "config/job_config.hpp"
#include "data/instructions.hpp"
#include "loader/feature_table.hpp"

namespace gt {

std::vector<InstructionRecord> read_job_records(const DataSection& data);

// Every record's dataset must have a feature table and its node ids must be rows of it.
void check_records_against_features(std::vector<InstructionRecord>& records, const FeatureTable& features,
                                    const DataSection& data);

}  // namespace gt
