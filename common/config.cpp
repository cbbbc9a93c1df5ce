#include "common/config.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "common/error.hpp"
#include "common/printable.hpp"

namespace gt {

static const char* type_name(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean: return "boolean";
    case toml::value_t::integer: return "integer";
    case toml::value_t::floating: return "float";
    case toml::value_t::string: return "string";
    case toml::value_t::array: return "array";
    case toml::value_t::table: return "table";
    default: return "date/time";
  }
}

// toml11 3.7 saturates an integer literal beyond int64 to INT64_MAX or INT64_MIN: whether a value
// at either limit really was written so is read off its text (decimal with an optional sign, or
// 0x / 0o / 0b; underscores between digits).
static bool integer_text_overflows(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.erase(0, 1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'o' || text[1] == 'b')) {
    base = text[1] == 'x' ? 16 : text[1] == 'o' ? 8 : 2;
    text.erase(0, 2);
  }
  const unsigned __int128 limit = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
  unsigned __int128 value = 0;
  for (char c : text) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0 || d >= base) return false;  // not an integer literal: toml11 has judged it
    value = value * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    if (value > limit) return true;
  }
  return false;
}

// Names and values from the file may hold any character a quoted TOML key or string can ("a\nb"):
// they are quoted through printable() (found by tests/fuzz/config_fuzz.cpp).
using gt::printable;

// toml11's message spans several lines; keep its first line and the note under the caret.
[[noreturn]] static void fail_syntax(const std::string& path, const toml::syntax_error& e) {
  std::string msg = e.what(), first = msg.substr(0, msg.find('\n')), note;
  if (first.rfind("[error] ", 0) == 0) first = first.substr(8);
  auto caret = msg.find('^');
  if (caret != std::string::npos) {
    note = msg.substr(caret, msg.find('\n', caret) - caret);
    note = note.substr(std::min(note.size(), note.find_first_not_of("^-~ ")));
  }
  fail(path, printable("not valid TOML at line " + std::to_string(e.location().line()) + ": " + first +
                       (note.empty() ? "" : " (" + note + ")")));
}

// Where the text stops being UTF-8 (overlong forms, surrogates and code points past U+10FFFF
// included), or npos. toml11 3.7 must never see such text: on invalid UTF-8 inside a string it
// rewinds an iterator of one buffer to a position in another and reads past the heap block
// (found by tests/fuzz/config_fuzz.cpp; TOML documents are UTF-8 anyway).
static size_t invalid_utf8_at(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) len = 3, lo = 0xa0;
    else if (c == 0xed) len = 3, hi = 0x9f;
    else if (c >= 0xe1 && c <= 0xef) len = 3;
    else if (c == 0xf0) len = 4, lo = 0x90;
    else if (c == 0xf4) len = 4, hi = 0x8f;
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else return i;
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char b = s[i + k];
      if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xbfu)) return i;
    }
    i += len;
  }
  return std::string::npos;
}

// The line at which arrays and inline tables nest deeper than max_depth, or 0. toml11 parses
// them recursively and runs out of stack at about 10,000 levels (a crash, not an error: found
// by tests/bad_inputs/config/deeply_nested_array.toml); no config nests beyond a few. Brackets
// inside strings and comments do not count.
static size_t too_deep_at(const std::string& s, int max_depth) {
  size_t line = 1;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
    } else if (c == '#') {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const bool multi = s.compare(i, 3, std::string(3, c)) == 0;
      const std::string close = multi ? std::string(3, c) : std::string(1, c);
      for (i += close.size(); i < s.size() && s.compare(i, close.size(), close) != 0; ++i) {
        if (s[i] == '\n') ++line;
        if (c == '"' && s[i] == '\\') ++i;  // an escape: the next character is not a quote
        if (!multi && s[i] == '\n') break;   // an unterminated string: toml11 says so
      }
      i += close.size() - 1;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return line;
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return 0;
}

ConfigReader::ConfigReader(const std::string& path) : path_(path), root_(toml::table{}) {
  if (path.empty()) return;
  std::ifstream in(path, std::ios::binary);
  // Line by line: getline reports a read error (a directory: EISDIR) as bad().
  std::string text;
  for (std::string line; in && std::getline(in, line);) text += line + '\n';
  if (!in.is_open() || in.bad()) fail(path, "cannot open (missing or unreadable)");
  // A truncated or never-written file, not a choice: defaults are what no -c gives.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail(path, "the file is empty (a config names at least [training].stage or a key to change)");
  parse_text(text);
}

ConfigReader ConfigReader::from_text(const std::string& text, const std::string& name) {
  ConfigReader r("");
  r.path_ = name;
  r.parse_text(text);
  return r;
}

void ConfigReader::parse_text(const std::string& text) {
  const size_t bad = invalid_utf8_at(text);
  if (bad != std::string::npos)
    fail(path_, "not valid TOML at line " + std::to_string(1 + std::count(text.begin(), text.begin() + bad, '\n')) +
                    ": not UTF-8 (byte " + std::to_string(bad) + ")");
  constexpr int kMaxNesting = 64;
  if (const size_t line = too_deep_at(text, kMaxNesting))
    fail(path_, "not valid TOML at line " + std::to_string(line) + ": arrays or inline tables nested deeper than " +
                    std::to_string(kMaxNesting));
  std::istringstream in(text);
  try {
    root_ = toml::parse(in, path_);
  } catch (const toml::syntax_error& e) {
    fail_syntax(path_, e);
  }
  check_sections();
}

void ConfigReader::check_sections() const {
  for (const auto& [section, body] : root_.as_table()) {
    if (!body.is_table()) fail(path_, "top-level key '" + printable(section) + "' must be a [section]");
  }
}

std::string ConfigReader::where(const std::string& section, const std::string& key) const {
  const std::string k = "[" + printable(section) + "]." + printable(key);
  if (overridden_.count(section + "." + key)) return "command line --" + printable(section + "." + key);
  return (path_.empty() ? std::string("config") : path_) + ": " + k;
}

void ConfigReader::reject(const std::string& section, const std::string& key, const std::string& problem) const {
  fail(where(section, key), printable(problem));
}

void ConfigReader::apply_override(const std::string& dotted_key, const std::string& value_text) {
  auto dot = dotted_key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted_key.size())
    fail("command line --" + printable(dotted_key), "expected --section.key VALUE");
  std::string section = dotted_key.substr(0, dot), key = dotted_key.substr(dot + 1);
  toml::value v;
  try {
    // Text that is not UTF-8 is a plain string; toml11 must not see it (invalid_utf8_at).
    if (invalid_utf8_at(value_text) != std::string::npos) throw std::invalid_argument("not UTF-8");
    std::istringstream in("v = " + value_text);
    v = toml::find(toml::parse(in, "override"), "v");
  } catch (const std::exception&) {
    v = toml::value(value_text);
  }
  auto& table = root_.as_table();
  if (!table.count(section)) table[section] = toml::table{};
  table[section].as_table()[key] = v;
  overridden_.insert(dotted_key);
}

const toml::value* ConfigReader::find(const std::string& section, const std::string& key) {
  asked_.insert(section + "." + key);
  const auto& table = root_.as_table();
  auto s = table.find(section);
  if (s == table.end()) return nullptr;
  const auto& st = s->second.as_table();
  auto k = st.find(key);
  return k == st.end() ? nullptr : &k->second;
}

std::string ConfigReader::get_string(const std::string& section, const std::string& key, const std::string& dflt) {
  const toml::value* v = find(section, key);
  if (!v) return dflt;
  if (v->is_string()) return v->as_string().str;
  // A command-line value such as --job.name 123 parses as an integer; a string key takes it.
  if (overridden_.count(section + "." + key) && (v->is_integer() || v->is_floating()))
    return toml::format(*v);
  reject(section, key, std::string("expected a string, got ") + type_name(*v));
}

int64_t ConfigReader::get_int(const std::string& section, const std::string& key, int64_t dflt) {
  const toml::value* v = find(section, key);
  if (!v) return dflt;
  if (!v->is_integer()) reject(section, key, std::string("expected an integer, got ") + type_name(*v));
  const int64_t n = v->as_integer();
  if (n == std::numeric_limits<int64_t>::max() || n == std::numeric_limits<int64_t>::min()) {
    const toml::source_location loc = v->location();
    const std::string& line = loc.line_str();
    const size_t at = loc.column() > 0 ? loc.column() - 1 : 0;
    const std::string text = at < line.size() ? line.substr(at, loc.region()) : std::string();
    if (integer_text_overflows(text))
      reject(section, key, printable(text) + " is out of range: an integer from -9223372036854775808 to 9223372036854775807");
  }
  return n;
}

double ConfigReader::get_float(const std::string& section, const std::string& key, double dflt) {
  const toml::value* v = find(section, key);
  if (!v) return dflt;
  if (v->is_integer()) return static_cast<double>(v->as_integer());
  if (!v->is_floating()) reject(section, key, std::string("expected a number, got ") + type_name(*v));
  return v->as_floating();
}

bool ConfigReader::get_bool(const std::string& section, const std::string& key, bool dflt) {
  const toml::value* v = find(section, key);
  if (!v) return dflt;
  if (!v->is_boolean()) reject(section, key, std::string("expected true or false, got ") + type_name(*v));
  return v->as_boolean();
}

void ConfigReader::finish() const {
  for (const auto& [section, body] : root_.as_table()) {
    bool section_known = false;
    for (const auto& a : asked_) section_known |= a.rfind(section + ".", 0) == 0;
    if (!section_known)
      fail((path_.empty() ? std::string("config") : path_) + ": [" + printable(section) + "]", "unknown section");
    for (const auto& [key, v] : body.as_table()) {
      if (!asked_.count(section + "." + key)) reject(section, key, "unknown key");
    }
  }
}

std::vector<std::pair<std::string, std::string>> take_overrides(const std::vector<std::string>& args,
                                                                std::vector<std::string>& rest) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) == 0 && a.find('.', 2) != std::string::npos) {
      std::string key = a.substr(2), value;
      auto eq = key.find('=');
      if (eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else {
        if (i + 1 >= args.size()) fail("command line " + a, "missing value");
        value = args[++i];
      }
      out.emplace_back(key, value);
    } else {
      rest.push_back(a);
    }
  }
  return out;
}

}  // namespace gt
