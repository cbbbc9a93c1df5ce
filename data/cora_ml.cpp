#include "data/cora_ml.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>
#include <utility>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/synthetic_graph.hpp"
#include "data/text_features.hpp"
#include "data/text_graph_io.hpp"

namespace gt {

namespace {

// The lines of a file (without '\n' or a trailing '\r'), numbered from 1; empty lines are kept
// so that numbers match the file, and the caller skips them.
std::vector<std::string> file_lines(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string line = bytes.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    pos = end + 1;
  }
  return lines;
}

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> cells;
  size_t a = 0;
  for (;;) {
    size_t b = s.find('\t', a);
    cells.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return cells;
}

std::string at_line(size_t i) { return "line " + std::to_string(i + 1) + ": "; }

int32_t parse_index(const std::string& path, size_t line, const std::string& cell, const char* what) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(cell.c_str(), &end, 10);
  if (cell.empty() || *end || errno || v < 0 || v > INT32_MAX)
    fail(path, at_line(line) + what + " '" + cell + "' is not a non-negative integer");
  return static_cast<int32_t>(v);
}

std::vector<std::vector<std::string>> tsv_rows(const std::string& path, const std::vector<std::string>& lines,
                                               size_t first, size_t fields, std::vector<size_t>& line_of) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = first; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    auto cells = split_tabs(lines[i]);
    if (cells.size() != fields)
      fail(path, at_line(i) + std::to_string(cells.size()) + " fields, want " + std::to_string(fields));
    rows.push_back(std::move(cells));
    line_of.push_back(i);
  }
  return rows;
}

// The rows of a TSV file whose first line must be exactly `header`.
std::vector<std::vector<std::string>> headed_tsv_rows(const std::string& path, const std::string& header,
                                                      size_t fields, std::vector<size_t>& line_of) {
  auto lines = file_lines(path);
  if (lines.empty() || lines[0] != header) fail(path, "line 1: header must be '" + header + "'");
  return tsv_rows(path, lines, 1, fields, line_of);
}

}  // namespace

bool is_cora_ml_folder(const std::string& dir) {
  return is_directory(dir) && !path_exists(join_path(dir, "meta.json")) &&
         path_exists(join_path(dir, "nodes.tsv")) && path_exists(join_path(dir, "edges.tsv")) &&
         path_exists(join_path(dir, "classes.txt"));
}

TextGraph load_cora_ml(const std::string& dir) {
  if (!is_directory(dir)) fail(dir, "no such folder");
  TextGraph g;
  g.name = "cora";
  g.params_json = "{\"source\": \"cora_ml\", \"title_words\": " + std::to_string(kCoraTitleWords) + "}";

  // classes.txt
  {
    const std::string path = join_path(dir, "classes.txt");
    std::vector<size_t> line_of;
    auto lines = file_lines(path);
    auto rows = tsv_rows(path, lines, 0, 2, line_of);
    if (rows.empty()) fail(path, "no classes");
    for (size_t r = 0; r < rows.size(); ++r) {
      if (parse_index(path, line_of[r], rows[r][0], "class index") != static_cast<int32_t>(r))
        fail(path, at_line(line_of[r]) + "class index " + rows[r][0] + ", want " + std::to_string(r));
      const std::string& full = rows[r][1];
      const size_t slash = full.rfind('/');
      std::string name = slash == std::string::npos ? full : full.substr(slash + 1);
      if (name.empty()) fail(path, at_line(line_of[r]) + "empty class name");
      g.class_names.push_back(name);
      g.class_descriptions.push_back(full);
    }
  }

  // nodes.tsv
  {
    const std::string path = join_path(dir, "nodes.tsv");
    std::vector<size_t> line_of;
    auto rows = headed_tsv_rows(path, "idx\tpaper_id\tlabel\tlabel_name\tkeywords", 5, line_of);
    if (rows.empty()) fail(path, "no nodes");
    g.nodes.resize(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t ln = line_of[r];
      if (parse_index(path, ln, rows[r][0], "idx") != static_cast<int32_t>(r))
        fail(path, at_line(ln) + "idx " + rows[r][0] + ", want " + std::to_string(r) + " (rows in idx order)");
      parse_index(path, ln, rows[r][1], "paper_id");
      const int32_t label = parse_index(path, ln, rows[r][2], "label");
      if (label >= g.num_classes())
        fail(path, at_line(ln) + "label " + rows[r][2] + " is not a class of classes.txt (" +
                       std::to_string(g.num_classes()) + " classes)");
      if (rows[r][3] != g.class_names[label])
        fail(path, at_line(ln) + "label_name '" + rows[r][3] + "' differs from classes.txt's '" +
                       g.class_names[label] + "' for label " + rows[r][2]);
      Node& v = g.nodes[r];
      v.id = static_cast<int32_t>(r);
      v.label = label;
      v.text = rows[r][4];
      // Title: the first kCoraTitleWords keywords.
      size_t pos = 0;
      for (int w = 0; w < kCoraTitleWords; ++w) {
        while (pos < v.text.size() && v.text[pos] == ' ') ++pos;
        if (pos >= v.text.size()) break;
        size_t end = v.text.find(' ', pos);
        if (end == std::string::npos) end = v.text.size();
        if (!v.title.empty()) v.title += ' ';
        v.title += v.text.substr(pos, end - pos);
        pos = end;
      }
    }
  }

  // edges.tsv
  {
    const std::string path = join_path(dir, "edges.tsv");
    std::vector<size_t> line_of;
    auto rows = headed_tsv_rows(path, "src\tdst", 2, line_of);
    std::set<std::pair<int32_t, int32_t>> seen;
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t ln = line_of[r];
      const int32_t s = parse_index(path, ln, rows[r][0], "src"), d = parse_index(path, ln, rows[r][1], "dst");
      if (s >= g.num_nodes() || d >= g.num_nodes())
        fail(path, at_line(ln) + "edge " + rows[r][0] + " -> " + rows[r][1] + " names a node outside nodes.tsv (" +
                       std::to_string(g.num_nodes()) + " nodes)");
      if (s == d) fail(path, at_line(ln) + "self loop on node " + rows[r][0]);
      if (!seen.emplace(s, d).second) fail(path, at_line(ln) + "duplicate edge " + rows[r][0] + " -> " + rows[r][1]);
      g.edges.emplace_back(s, d);
    }
    std::sort(g.edges.begin(), g.edges.end());
  }

  g.feature_dim = kCoraFeatureDim;
  g.features.resize(static_cast<size_t>(g.num_nodes()) * g.feature_dim);
  for (const Node& v : g.nodes)
    text_feature(v.text, g.feature_dim, g.features.data() + static_cast<size_t>(v.id) * g.feature_dim);
  check_text_graph(g, dir);
  g.build_adjacency();
  return g;
}

TextGraph load_graph(const std::string& spec) {
  if (spec == "embedded") {
    TextGraph g = make_synthetic_graph(SyntheticGraphParams{});
    return g;
  }
  if (!is_directory(spec))
    fail(spec, "no such graph folder (want 'embedded', a graphtune text-graph folder or a cora_ml folder)");
  if (path_exists(join_path(spec, "meta.json"))) return read_text_graph(spec);
  if (is_cora_ml_folder(spec)) return load_cora_ml(spec);
  fail(spec, "not a graph folder: neither meta.json (graphtune text graph) nor nodes.tsv, edges.tsv and "
             "classes.txt (cora_ml)");
}

}  // namespace gt
