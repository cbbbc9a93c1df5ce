#include "data/text_graph.hpp"

#include <algorithm>
#include <set>

#include "common/error.hpp"

namespace gt {

// Counting sort by row, then sort each row: O(E log d) and the result depends only on the edge
// set, not on the order edges were added.
static Csr make_csr(int32_t n, const std::vector<std::pair<int32_t, int32_t>>& pairs) {
  Csr c;
  c.offsets.assign(static_cast<size_t>(n) + 1, 0);
  for (const auto& p : pairs) ++c.offsets[p.first + 1];
  for (int32_t i = 0; i < n; ++i) c.offsets[i + 1] += c.offsets[i];
  c.targets.resize(pairs.size());
  std::vector<int64_t> fill(c.offsets.begin(), c.offsets.end() - 1);
  for (const auto& p : pairs) c.targets[fill[p.first]++] = p.second;
  // Sort and drop duplicates inside each row (the undirected view sees u-v twice when both
  // u->v and v->u exist), then compact.
  int64_t out = 0;
  for (int32_t i = 0; i < n; ++i) {
    auto b = c.targets.begin() + c.offsets[i], e = c.targets.begin() + c.offsets[i + 1];
    std::sort(b, e);
    e = std::unique(b, e);
    int64_t len = e - b;
    std::move(b, e, c.targets.begin() + out);
    c.offsets[i] = out;
    out += len;
  }
  c.offsets[n] = out;
  c.targets.resize(static_cast<size_t>(out));
  return c;
}

void TextGraph::build_adjacency() {
  const int32_t n = num_nodes();
  std::vector<std::pair<int32_t, int32_t>> rev, both;
  rev.reserve(edges.size());
  both.reserve(2 * edges.size());
  for (const auto& e : edges) {
    rev.emplace_back(e.second, e.first);
    both.push_back(e);
    both.emplace_back(e.second, e.first);
  }
  out_adj = make_csr(n, edges);
  in_adj = make_csr(n, rev);
  undirected_adj = make_csr(n, both);
}

static bool has_line_breaks_or_tabs(const std::string& s) {
  return s.find_first_of("\t\r\n") != std::string::npos;
}

void check_text_graph(const TextGraph& g, const std::string& where) {
  const int32_t n = g.num_nodes(), c = g.num_classes();
  if (g.class_descriptions.size() != g.class_names.size())
    fail(where, "class names and descriptions differ in number");
  for (int32_t k = 0; k < c; ++k)
    if (has_line_breaks_or_tabs(g.class_names[k]) || has_line_breaks_or_tabs(g.class_descriptions[k]))
      fail(where, "class " + std::to_string(k) + " has a tab or line break in its name or description");
  for (int32_t i = 0; i < n; ++i) {
    const Node& v = g.nodes[i];
    if (v.id != i) fail(where, "node " + std::to_string(i) + " has id " + std::to_string(v.id));
    if (v.label < 0 || v.label >= c)
      fail(where, "node " + std::to_string(i) + " has label " + std::to_string(v.label) + " outside [0, " +
                      std::to_string(c) + ")");
    if (has_line_breaks_or_tabs(v.title) || has_line_breaks_or_tabs(v.text))
      fail(where, "node " + std::to_string(i) + " has a tab or line break in its title or text");
  }
  std::set<std::pair<int32_t, int32_t>> seen;
  for (const auto& e : g.edges) {
    if (e.first < 0 || e.first >= n || e.second < 0 || e.second >= n)
      fail(where, "edge (" + std::to_string(e.first) + ", " + std::to_string(e.second) + ") has an end outside the graph");
    if (e.first == e.second) fail(where, "self loop at node " + std::to_string(e.first));
    if (!seen.insert(e).second)
      fail(where, "duplicate edge (" + std::to_string(e.first) + ", " + std::to_string(e.second) + ")");
  }
  if (g.feature_dim <= 0 || g.features.size() != static_cast<size_t>(n) * g.feature_dim)
    fail(where, "features hold " + std::to_string(g.features.size()) + " values, want nodes x feature_dim = " +
                    std::to_string(n) + " x " + std::to_string(g.feature_dim));
}

static double percentile(std::vector<int32_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));  // nearest rank below
  return v[k];
}

GraphStats graph_stats(const TextGraph& g) {
  GraphStats s;
  s.num_nodes = g.num_nodes();
  s.num_classes = g.num_classes();
  s.num_edges = static_cast<int64_t>(g.edges.size());
  s.class_counts.assign(static_cast<size_t>(s.num_classes), 0);
  for (const Node& v : g.nodes) ++s.class_counts[v.label];
  int64_t same = 0;
  for (const auto& e : g.edges) same += g.nodes[e.first].label == g.nodes[e.second].label;
  s.homophily = s.num_edges ? static_cast<double>(same) / static_cast<double>(s.num_edges) : 0;
  s.mean_out_degree = s.num_nodes ? static_cast<double>(s.num_edges) / s.num_nodes : 0;
  std::vector<int32_t> in_deg(static_cast<size_t>(s.num_nodes));
  for (int32_t i = 0; i < s.num_nodes; ++i) {
    in_deg[i] = g.in_adj.degree(i);
    s.max_in_degree = std::max(s.max_in_degree, in_deg[i]);
    s.max_out_degree = std::max(s.max_out_degree, g.out_adj.degree(i));
    s.max_degree = std::max(s.max_degree, g.undirected_adj.degree(i));
    s.isolated_nodes += g.undirected_adj.degree(i) == 0;
  }
  s.in_degree_p50 = percentile(in_deg, 0.5);
  s.in_degree_p99 = percentile(in_deg, 0.99);
  return s;
}

}  // namespace gt
