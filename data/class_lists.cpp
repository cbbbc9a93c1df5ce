#include "data/class_lists.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "common/text.hpp"
#include "data/metrics.hpp"

namespace gt {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first field of every CSV row. Written out because only the first field is wanted and a
// quoted description may hold commas, doubled quotes and line breaks; no CSV library is in the
// dependency set for this alone.
std::vector<std::string> csv_first_fields(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    std::string field;
    size_t field_no = 0;
    bool row_has_text = false;
    while (i < n) {  // one row
      if (text[i] == '"') {
        ++i;
        std::string value;
        while (i < n) {
          if (text[i] == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              value += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          value += text[i++];
        }
        if (field_no == 0) field += value;
        row_has_text = true;
      } else if (text[i] == ',') {
        ++field_no;
        ++i;
        row_has_text = true;
      } else if (text[i] == '\n' || text[i] == '\r') {
        if (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') ++i;
        ++i;
        break;
      } else {
        if (field_no == 0) field += text[i];
        row_has_text = true;
        ++i;
      }
    }
    if (row_has_text) out.push_back(trim_whitespace(field));
  }
  return out;
}

bool is_arxiv_heading(const std::string& line) {
  // "cs.AI (Artificial Intelligence)"
  return line.size() > 7 && line.compare(0, 3, "cs.") == 0 && std::isupper(static_cast<unsigned char>(line[3])) &&
         std::isupper(static_cast<unsigned char>(line[4])) && line.compare(5, 2, " (") == 0;
}

std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(trim_whitespace(text.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return lines;
}

std::vector<std::string> from_json(const nlohmann::json& j, const std::string& where) {
  std::vector<std::string> names;
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string()) fail(where, "entry " + std::to_string(i) + " is not a string");
      names.push_back(trim_whitespace(j[i].get<std::string>()));
    }
    return names;
  }
  if (!j.is_object()) fail(where, "must be a list of class names or an object of node id -> label");
  std::set<std::string> distinct;
  for (const auto& [id, label] : j.items()) {
    if (!label.is_string()) fail(where, "the label of node " + id + " is not a string");
    const std::string l = trim_whitespace(label.get<std::string>());
    if (!l.empty() && l != "nan") distinct.insert(l);  // GraphGPT marks unlabelled nodes "nan"
  }
  return {distinct.begin(), distinct.end()};
}

void check_names(const std::vector<std::string>& names, const std::string& where) {
  if (names.empty()) fail(where, "holds no class names");
  std::vector<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string n = normalise_answer(names[i]);
    if (n.empty()) fail(where, "class " + std::to_string(i) + " (\"" + names[i] + "\") is empty once normalised");
    for (size_t j = 0; j < seen.size(); ++j)
      if (seen[j] == n)
        fail(where, "classes " + std::to_string(j) + " and " + std::to_string(i) + " are both \"" + n + "\" once normalised");
    seen.push_back(n);
  }
}

}  // namespace

std::vector<std::string> read_class_list(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string> names;
  if (ends_with(lower(path), ".json")) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) fail(path, "is not valid JSON");
    names = from_json(j, path);
  } else if (ends_with(lower(path), ".csv")) {
    names = csv_first_fields(text);
    if (!names.empty()) {
      const std::string h = lower(names.front());
      if (h.empty() || h == "name" || h == "label" || h == "class") names.erase(names.begin());
    }
  } else {
    const std::vector<std::string> lines = text_lines(text);
    const bool arxiv = std::any_of(lines.begin(), lines.end(), is_arxiv_heading);
    for (const auto& l : lines) {
      if (arxiv) {
        if (is_arxiv_heading(l)) names.push_back(l.substr(0, 5));
      } else if (!l.empty() && l[0] != '#') {
        names.push_back(l);
      }
    }
  }
  check_names(names, path);
  return names;
}

std::map<std::string, std::vector<std::string>> read_class_lists(const std::string& path) {
  const nlohmann::json j = read_json_object(path);
  if (j.empty()) fail(path, "names no dataset (an object of dataset -> class names or a class-list file)");
  const std::string dir = parent_path(path);
  std::map<std::string, std::vector<std::string>> lists;
  for (const auto& [dataset, v] : j.items()) {
    const std::string where = path + ": \"" + dataset + "\"";
    if (dataset.empty()) fail(path, "a dataset name is empty");
    if (v.is_string()) {
      const std::string file = v.get<std::string>();
      if (file.empty()) fail(where, "the class-list path is empty");
      lists[dataset] = read_class_list(file[0] == '/' ? file : join_path(dir, file));
    } else if (v.is_array()) {
      lists[dataset] = from_json(v, where);
      check_names(lists[dataset], where);
    } else {
      fail(where, "must be a list of class names or the path of a class-list file");
    }
  }
  return lists;
}

}  // namespace gt
