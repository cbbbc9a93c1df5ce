#include "common/config.hpp"

#include <sstream>

#include "common/error.hpp"

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

ConfigReader::ConfigReader(const std::string& path) : path_(path), root_(toml::table{}) {
  if (path.empty()) return;
  try {
    root_ = toml::parse(path);
  } catch (const toml::syntax_error& e) {
    // toml11's message spans several lines; keep its first line and the note under the caret.
    std::string msg = e.what(), first = msg.substr(0, msg.find('\n')), note;
    if (first.rfind("[error] ", 0) == 0) first = first.substr(8);
    auto caret = msg.find('^');
    if (caret != std::string::npos) {
      note = msg.substr(caret, msg.find('\n', caret) - caret);
      note = note.substr(std::min(note.size(), note.find_first_not_of("^-~ ")));
    }
    fail(path, "not valid TOML at line " + std::to_string(e.location().line()) + ": " + first +
                   (note.empty() ? "" : " (" + note + ")"));
  } catch (const std::runtime_error&) {
    fail(path, "cannot open (missing or unreadable)");
  }
  for (const auto& [section, body] : root_.as_table()) {
    if (!body.is_table()) fail(path_, "top-level key '" + section + "' must be a [section]");
  }
}

std::string ConfigReader::where(const std::string& section, const std::string& key) const {
  const std::string k = "[" + section + "]." + key;
  if (overridden_.count(section + "." + key)) return "command line --" + section + "." + key;
  return (path_.empty() ? std::string("config") : path_) + ": " + k;
}

void ConfigReader::reject(const std::string& section, const std::string& key, const std::string& problem) const {
  fail(where(section, key), problem);
}

void ConfigReader::apply_override(const std::string& dotted_key, const std::string& value_text) {
  auto dot = dotted_key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted_key.size())
    fail("command line --" + dotted_key, "expected --section.key VALUE");
  std::string section = dotted_key.substr(0, dot), key = dotted_key.substr(dot + 1);
  toml::value v;
  try {
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
  return v->as_integer();
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
      fail((path_.empty() ? std::string("config") : path_) + ": [" + section + "]", "unknown section");
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
