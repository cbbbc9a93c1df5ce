#pragma once
// Plain-text formatting for what the launcher prints: the end-of-run table (per rank: rank,
// host, local rank, steps, last loss, peak RSS MiB; and the totals), durations and counts.
#include <string>
#include <vector>

namespace gt {

// Columns padded to their widest cell and separated by two spaces, a rule of dashes under the
// header, one row per line, no trailing blanks. A cell that parses as a number ("12",
// "-0.5", "1,234", "2.3e-05") is right-aligned, anything else left-aligned; a header is
// right-aligned over a column whose non-blank cells are all numbers. Short rows are padded with empty cells.
std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "45.2s" under a minute, "3m12s" under an hour, "1h02m" from there on; "--" when unknown
// (negative or not finite).
std::string format_duration(double seconds);

// Rounded to a whole number, with thousands separators: "1,234", "-12,000"; "--" when not finite.
std::string format_count(double value);

// printf's "%.*f": "0.1235" for (0.12345, 4).
std::string format_fixed(double value, int digits);

// True for what format_table right-aligns.
bool looks_numeric(const std::string& cell);

}  // namespace gt
