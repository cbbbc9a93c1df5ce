#include "launcher/summary_table.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gt {

bool looks_numeric(const std::string& cell) {
  // Only digits, signs, '.', ',', 'e': strtod alone would also take "nan", "inf" and hex,
  // which in a host column are names, not numbers.
  std::string plain;
  bool has_digit = false;
  for (const char c : cell) {
    if (c == ',') continue;  // thousands separators from format_count
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
      return false;
    has_digit = has_digit || std::isdigit(static_cast<unsigned char>(c));
    plain.push_back(c);
  }
  if (!has_digit) return false;
  char* end = nullptr;
  std::strtod(plain.c_str(), &end);
  return end == plain.c_str() + plain.size();
}

std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::size_t columns = header.size();
  for (const auto& row : rows) columns = std::max(columns, row.size());
  auto cell = [](const std::vector<std::string>& row, std::size_t c) { return c < row.size() ? row[c] : std::string(); };

  std::vector<std::size_t> width(columns, 0);
  std::vector<bool> numeric_column(columns, false);
  for (std::size_t c = 0; c < columns; ++c) {
    width[c] = cell(header, c).size();
    bool any_number = false, only_numbers = true;  // blank cells (a totals row) do not count
    for (const auto& row : rows) {
      const std::string text = cell(row, c);
      width[c] = std::max(width[c], text.size());
      if (text.empty()) continue;
      any_number = any_number || looks_numeric(text);
      only_numbers = only_numbers && looks_numeric(text);
    }
    numeric_column[c] = any_number && only_numbers;
  }

  auto line = [&](const std::vector<std::string>& texts, const std::vector<bool>& right) {
    std::string out;
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string text = cell(texts, c);
      const std::string pad(width[c] - text.size(), ' ');
      if (c > 0) out += "  ";
      out += right[c] ? pad + text : text + pad;
    }
    out.erase(out.find_last_not_of(' ') + 1);
    return out + "\n";
  };

  std::string table = line(header, numeric_column);
  std::vector<std::string> rule;
  for (std::size_t c = 0; c < columns; ++c) rule.emplace_back(width[c], '-');
  table += line(rule, std::vector<bool>(columns, false));
  for (const auto& row : rows) {
    std::vector<bool> right(columns);
    for (std::size_t c = 0; c < columns; ++c) right[c] = looks_numeric(cell(row, c));
    table += line(row, right);
  }
  return table;
}

std::string format_fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  char text[64];
  if (seconds < 59.95) {  // what %.1f would print as "60.0s" is a minute
    std::snprintf(text, sizeof text, "%.1fs", seconds);
    return text;
  }
  const long long whole = std::llround(seconds);
  if (whole < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", whole / 60, whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", whole / 3600, whole % 3600 / 60);
  }
  return text;
}

std::string format_count(double value) {
  if (!std::isfinite(value)) return "--";
  const double rounded = std::round(value);
  if (std::fabs(rounded) >= 1e18) {  // past long long; no one reads the separators there
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", rounded);
    return text;
  }
  const long long whole = static_cast<long long>(rounded);
  std::string digits = std::to_string(whole < 0 ? -whole : whole);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return whole < 0 ? "-" + digits : digits;
}

}  // namespace gt
