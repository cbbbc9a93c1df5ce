#include "data/text_graph_io.hpp"

#include <cstring>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "common/staged_folder.hpp"

namespace gt {

constexpr int kFormatVersion = 1;

std::string npy_float32(const float* data, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended by a
  // newline so the data starts on a 64-byte boundary, as numpy writes it.
  const size_t preamble = 10;
  size_t total = preamble + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  const size_t start = out.size();
  out.resize(start + 4 * n);
  for (size_t i = 0; i < n; ++i) {  // explicit little-endian, whatever the host order
    uint32_t bits;
    std::memcpy(&bits, &data[i], 4);
    for (int b = 0; b < 4; ++b) out[start + 4 * i + b] = static_cast<char>(bits >> (8 * b));
  }
  return out;
}

static std::string nodes_tsv(const TextGraph& g) {
  std::string s = "idx\tlabel\tlabel_name\ttitle\ttext\n";
  for (const Node& v : g.nodes)
    s += std::to_string(v.id) + "\t" + std::to_string(v.label) + "\t" + g.class_names[v.label] + "\t" + v.title +
         "\t" + v.text + "\n";
  return s;
}

static std::string edges_tsv(const TextGraph& g) {
  std::string s = "src\tdst\n";
  for (const auto& e : g.edges) s += std::to_string(e.first) + "\t" + std::to_string(e.second) + "\n";
  return s;
}

static std::string classes_tsv(const TextGraph& g) {
  std::string s = "idx\tname\tdescription\n";
  for (int32_t c = 0; c < g.num_classes(); ++c)
    s += std::to_string(c) + "\t" + g.class_names[c] + "\t" + g.class_descriptions[c] + "\n";
  return s;
}

static nlohmann::ordered_json stats_json(const GraphStats& s) {
  nlohmann::ordered_json j;
  j["homophily"] = s.homophily;
  j["mean_out_degree"] = s.mean_out_degree;
  j["max_in_degree"] = s.max_in_degree;
  j["max_out_degree"] = s.max_out_degree;
  j["max_degree"] = s.max_degree;
  j["in_degree_p50"] = s.in_degree_p50;
  j["in_degree_p99"] = s.in_degree_p99;
  j["isolated_nodes"] = s.isolated_nodes;
  j["class_counts"] = s.class_counts;
  return j;
}

// An existing empty folder is simply filled; a non-empty one is replaced only with overwrite.
static ReplaceRule replace_rule(bool overwrite) {
  ReplaceRule r;
  r.overwrite = overwrite;
  return r;
}

static std::string without_trailing_slash(const std::string& dir_in) {
  std::string dir = strip_trailing_slashes(dir_in);
  if (dir.empty()) fail("--out", "the output folder name is empty");
  return dir;
}

void check_output_folder(const std::string& dir, bool overwrite) {
  StagedFolder::check(without_trailing_slash(dir), replace_rule(overwrite));
}

void write_text_graph(const TextGraph& g, const std::string& dir_in, bool overwrite) {
  const std::string dir = without_trailing_slash(dir_in);
  check_text_graph(g, dir);
  check_output_folder(dir, overwrite);  // before creating any parent folder
  make_dirs(parent_path(dir));
  StagedFolder out(dir, replace_rule(overwrite));

  const std::vector<std::pair<std::string, std::string>> files = {
      {"classes.tsv", classes_tsv(g)},
      {"nodes.tsv", nodes_tsv(g)},
      {"edges.tsv", edges_tsv(g)},
      {"features.npy", npy_float32(g.features.data(), g.num_nodes(), g.feature_dim)},
  };
  nlohmann::ordered_json meta;
  meta["format"] = "graphtune text graph";
  meta["format_version"] = kFormatVersion;
  meta["name"] = g.name;
  meta["num_nodes"] = g.num_nodes();
  meta["num_edges"] = g.edges.size();
  meta["num_classes"] = g.num_classes();
  meta["feature_dim"] = g.feature_dim;
  meta["generator"] = nlohmann::ordered_json::parse(g.params_json);
  meta["stats"] = stats_json(graph_stats(g));
  for (const auto& f : files) {
    write_file_atomic(join_path(out.path(), f.first), f.second);
    meta["files"][f.first] = {{"bytes", f.second.size()}, {"sha256", sha256_hex(f.second)}};
  }
  write_file_atomic(join_path(out.path(), "meta.json"), meta.dump(2) + "\n");
  out.commit();
}

}  // namespace gt
