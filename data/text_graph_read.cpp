// Reading a text-graph folder (declared in text_graph_io.hpp): the inverse of write_text_graph,
// strict about shape so a hand-made or damaged folder fails with a message, not a crash.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/sha256.hpp"
#include "data/text_graph_io.hpp"

namespace gt {

// The rows of a TSV file that starts with exactly `header`; every row has as many cells.
static std::vector<std::vector<std::string>> read_tsv(const std::string& path, const std::string& bytes,
                                                      const std::string& header) {
  std::vector<std::vector<std::string>> rows;
  size_t pos = 0, line = 0;
  const size_t fields = static_cast<size_t>(std::count(header.begin(), header.end(), '\t')) + 1;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string text = bytes.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (line == 1) {
      if (text != header) fail(path, "line 1: header must be '" + header + "'");
      continue;
    }
    if (text.empty()) continue;
    std::vector<std::string> cells;
    size_t a = 0;
    for (;;) {
      size_t b = text.find('\t', a);
      cells.push_back(text.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    if (cells.size() != fields)
      fail(path, "line " + std::to_string(line) + ": " + std::to_string(cells.size()) + " fields, want " +
                     std::to_string(fields));
    rows.push_back(std::move(cells));
  }
  if (line == 0) fail(path, "empty file (want the header '" + header + "')");
  return rows;
}

static int32_t to_index(const std::string& path, size_t row, const std::string& cell) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(cell.c_str(), &end, 10);
  if (cell.empty() || *end || errno || v < 0 || v > INT32_MAX)
    fail(path, "line " + std::to_string(row + 2) + ": '" + cell + "' is not a non-negative integer");
  return static_cast<int32_t>(v);
}

// NPY 1.0/2.0, '<f4', C order, two dimensions.
static std::vector<float> read_npy(const std::string& path, const std::string& b, int64_t& rows, int64_t& cols) {
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) fail(path, "not an .npy file");
  const int major = static_cast<unsigned char>(b[6]);
  size_t hlen, start;
  if (major == 1) {
    hlen = static_cast<unsigned char>(b[8]) | static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) fail(path, "truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    start = 12;
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (b.size() < start + hlen) fail(path, "truncated header");
  const std::string h = b.substr(start, hlen);
  if (h.find("'descr': '<f4'") == std::string::npos) fail(path, "dtype must be little-endian float32 ('<f4')");
  if (h.find("'fortran_order': False") == std::string::npos) fail(path, "must be in C order");
  long long r = -1, c = -1;
  size_t sp = h.find("'shape': (");
  if (sp == std::string::npos || std::sscanf(h.c_str() + sp, "'shape': (%lld, %lld)", &r, &c) != 2)
    fail(path, "shape must be two-dimensional (nodes, feature_dim)");
  const size_t data_bytes = b.size() - start - hlen;
  // Compare without multiplying first: a damaged header must not overflow the size check.
  if (r < 0 || c <= 0 || static_cast<unsigned long long>(r) > data_bytes / 4 / static_cast<unsigned long long>(c) ||
      data_bytes != 4 * static_cast<size_t>(r) * static_cast<size_t>(c))
    fail(path, "holds " + std::to_string(data_bytes) + " data bytes, want 4 x " + std::to_string(r) + " x " +
                   std::to_string(c));
  rows = r;
  cols = c;
  const size_t n = static_cast<size_t>(r) * static_cast<size_t>(c);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) bits |= static_cast<uint32_t>(static_cast<unsigned char>(b[start + hlen + 4 * i + k])) << (8 * k);
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

TextGraph read_text_graph(const std::string& dir) {
  TextGraph g;
  const std::string meta_path = dir + "/meta.json";
  nlohmann::ordered_json meta;
  try {
    meta = nlohmann::ordered_json::parse(read_file(meta_path));
  } catch (const nlohmann::json::exception& e) {
    fail(meta_path, std::string("not valid JSON: ") + e.what());
  }
  auto file = [&](const char* name) {
    const std::string path = dir + "/" + name;
    std::string bytes = read_file(path);
    if (meta.contains("files") && meta["files"].contains(name)) {
      const auto& f = meta["files"][name];
      if (f.contains("bytes") && f["bytes"] != bytes.size())
        fail(path, "is " + std::to_string(bytes.size()) + " bytes, meta.json says " + f["bytes"].dump());
      if (f.contains("sha256") && f["sha256"] != sha256_hex(bytes)) fail(path, "sha256 differs from meta.json");
    }
    return bytes;
  };
  if (meta.contains("name") && meta["name"].is_string()) g.name = meta["name"];
  if (meta.contains("generator")) g.params_json = meta["generator"].dump();

  const std::string classes_path = dir + "/classes.tsv", nodes_path = dir + "/nodes.tsv",
                    edges_path = dir + "/edges.tsv", features_path = dir + "/features.npy";
  auto classes = read_tsv(classes_path, file("classes.tsv"), "idx\tname\tdescription");
  for (size_t r = 0; r < classes.size(); ++r) {
    if (to_index(classes_path, r, classes[r][0]) != static_cast<int32_t>(r))
      fail(classes_path, "line " + std::to_string(r + 2) + ": classes must be numbered 0, 1, ... in order");
    g.class_names.push_back(classes[r][1]);
    g.class_descriptions.push_back(classes[r][2]);
  }
  if (classes.empty()) fail(classes_path, "holds no classes (only the header)");
  auto nodes = read_tsv(nodes_path, file("nodes.tsv"), "idx\tlabel\tlabel_name\ttitle\ttext");
  if (nodes.empty()) fail(nodes_path, "holds no nodes (only the header)");
  g.nodes.resize(nodes.size());
  for (size_t r = 0; r < nodes.size(); ++r) {
    Node& v = g.nodes[r];
    v.id = to_index(nodes_path, r, nodes[r][0]);
    if (v.id != static_cast<int32_t>(r))
      fail(nodes_path, "line " + std::to_string(r + 2) + ": nodes must be numbered 0, 1, ... in order");
    v.label = to_index(nodes_path, r, nodes[r][1]);
    if (v.label >= g.num_classes())
      fail(nodes_path, "line " + std::to_string(r + 2) + ": label " + nodes[r][1] + " is not in classes.tsv");
    v.title = nodes[r][3];
    v.text = nodes[r][4];
  }
  // check_text_graph checks edges again, but only this reader knows the line to name.
  std::set<std::pair<int32_t, int32_t>> seen;
  for (const auto& row : read_tsv(edges_path, file("edges.tsv"), "src\tdst")) {
    const size_t r = g.edges.size();
    const std::string line = "line " + std::to_string(r + 2) + ": ";
    const std::pair<int32_t, int32_t> e(to_index(edges_path, r, row[0]), to_index(edges_path, r, row[1]));
    for (int32_t end : {e.first, e.second})
      if (end >= g.num_nodes())
        fail(edges_path, line + "node " + std::to_string(end) + " is not in nodes.tsv (" +
                             std::to_string(g.num_nodes()) + " nodes)");
    if (e.first == e.second) fail(edges_path, line + "self loop at node " + std::to_string(e.first));
    if (!seen.insert(e).second)
      fail(edges_path, line + "duplicate edge (" + std::to_string(e.first) + ", " + std::to_string(e.second) + ")");
    g.edges.push_back(e);
  }
  int64_t rows = 0, cols = 0;
  g.features = read_npy(features_path, file("features.npy"), rows, cols);
  if (rows != g.num_nodes())
    fail(features_path, "has " + std::to_string(rows) + " rows, nodes.tsv has " + std::to_string(g.num_nodes()) + " nodes");
  g.feature_dim = static_cast<int32_t>(cols);
  check_text_graph(g, dir);
  g.build_adjacency();
  return g;
}

}  // namespace gt
