#pragma once
// TOML job configs in the torchtitan manner: sections ([job] [model] [data] [training]
// [optimizer] [lr_scheduler] ...), every key overridable on the command line as
// `--section.key value`. ConfigReader hands out typed values with defaults, remembers which
// keys were asked for, and finish() rejects any key nobody asked for: a typo is an error
// naming the file and key, never a silently ignored setting.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <toml.hpp>

namespace gt {

class ConfigReader {
 public:
  // path may be empty (defaults plus overrides only).
  explicit ConfigReader(const std::string& path);
  // The same from TOML text; `name` stands for the file in errors (tests/fuzz/config_fuzz.cpp).
  static ConfigReader from_text(const std::string& text, const std::string& name);

  // "section.key" -> value text, e.g. {"training.steps", "100"}. The value is read as a TOML
  // value when it parses as one, otherwise as a string.
  void apply_override(const std::string& dotted_key, const std::string& value_text);

  std::string get_string(const std::string& section, const std::string& key, const std::string& dflt);
  int64_t get_int(const std::string& section, const std::string& key, int64_t dflt);
  double get_float(const std::string& section, const std::string& key, double dflt);
  bool get_bool(const std::string& section, const std::string& key, bool dflt);

  // Errors for keys and sections that were never asked for.
  void finish() const;

  // "FILE: [section].key" for error messages ("command line --section.key" for an override).
  std::string where(const std::string& section, const std::string& key) const;
  // The "section.key" names given as overrides.
  const std::set<std::string>& overridden() const { return overridden_; }
  [[noreturn]] void reject(const std::string& section, const std::string& key, const std::string& problem) const;

 private:
  void parse_text(const std::string& text);  // the file's whole text; path_ names it
  void check_sections() const;
  const toml::value* find(const std::string& section, const std::string& key);
  std::string path_;
  toml::value root_;
  std::set<std::string> asked_;
  std::set<std::string> overridden_;
};

// Splits argv-style "--section.key value" pairs off a list of arguments; what remains is
// returned in `rest`.
std::vector<std::pair<std::string, std::string>> take_overrides(const std::vector<std::string>& args,
                                                                std::vector<std::string>& rest);

}  // namespace gt
