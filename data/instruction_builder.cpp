#include "data/instruction_builder.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>


#include "common/error.hpp"
#include "common/rng.hpp"

namespace gt {

const char* const kGraphMatchingQuestionHead =
    "Given a sequence of graph tokens <graph> that constitute a subgraph of a citation graph, where the first "
    "token represents the central node of the subgraph, and the remaining nodes represent the first and second "
    "order neighbors of the central node. Each graph token contains the title and abstract information of the "
    "paper at this node. Here is a list of paper titles: ";
const char* const kGraphMatchingQuestionTail =
    ", please reorder the list of papers according to the order of graph tokens (i.e., complete the matching of "
    "graph tokens and papers).";
const char* const kGraphMatchingAnswerHead =
    "Based on the given graph tokens and the list of paper titles, we obtain the matching of graph tokens and "
    "papers as follows: ";
const char* const kLinkPredictionQuestion =
    "Given a sequence of graph tokens: <graph> that constitute a subgraph of a citation graph, where the first "
    "token represents the central node of the subgraph, and the remaining nodes represent the first and second "
    "order neighbors of the central node. Each graph token contains the title and abstract information of the "
    "paper at this node. Given another sequence of graph tokens: <graph>, which constitute another subgraph of "
    "the citation graph in the same way. If the first token of both sequences represents a central node, are "
    "these two central nodes connected? Give me a direct answer of \"yes\" or \"no\".";

InstructionTask parse_instruction_task(const std::string& name) {
  if (name == "graph_matching") return InstructionTask::kGraphMatching;
  if (name == "node_classification") return InstructionTask::kNodeClassification;
  if (name == "link_prediction") return InstructionTask::kLinkPrediction;
  fail("--task", "unknown task '" + name + "' (want graph_matching, node_classification or link_prediction)");
}

const char* instruction_task_name(InstructionTask t) {
  switch (t) {
    case InstructionTask::kGraphMatching: return "graph_matching";
    case InstructionTask::kNodeClassification: return "node_classification";
    case InstructionTask::kLinkPrediction: return "link_prediction";
  }
  return "?";
}

SplitPart parse_split_part(const std::string& name) {
  if (name == "train") return SplitPart::kTrain;
  if (name == "val") return SplitPart::kVal;
  if (name == "test") return SplitPart::kTest;
  fail("--split", "unknown split '" + name + "' (want train, val or test)");
}

const char* split_part_name(SplitPart p) {
  return p == SplitPart::kTrain ? "train" : p == SplitPart::kVal ? "val" : "test";
}

static void check_fraction(const char* flag, double v) {
  if (!(v >= 0 && v <= 1)) fail(flag, "must be in [0, 1], got " + std::to_string(v));
}

void validate(const InstructionBuildOptions& o) {
  check_fraction("--train-frac", o.train_frac);
  check_fraction("--val-frac", o.val_frac);
  if (o.train_frac + o.val_frac > 1)
    fail("--val-frac", "--train-frac + --val-frac add up to " + std::to_string(o.train_frac + o.val_frac) +
                           ", more than 1");
  check_fraction("--edge-val-frac", o.edge_val_frac);
  check_fraction("--edge-test-frac", o.edge_test_frac);
  if (o.edge_val_frac + o.edge_test_frac > 1)
    fail("--edge-test-frac", "--edge-val-frac + --edge-test-frac add up to more than 1");
  // A subgraph's size grows with fanout^hops; the hop field's graph is the centre once a hop, so
  // its own bound (below) replaces this one.
  if (o.record_template != "hop_field" && (o.hops < 0 || o.hops > 8))
    fail("--hops", "must be in [0, 8], got " + std::to_string(o.hops));
  if (o.fanout < 1 || o.fanout > 1000) fail("--fanout", "must be in [1, 1000], got " + std::to_string(o.fanout));
  if (o.max_nodes < 0) fail("--max-nodes", "must be >= 0 (0: no cap), got " + std::to_string(o.max_nodes));
  if (o.max_records < 0) fail("--max-records", "must be >= 0 (0: all), got " + std::to_string(o.max_records));
  if (o.record_template != "graphgpt" && o.record_template != "llaga" && o.record_template != "hop_field")
    fail("--template", "unknown template '" + o.record_template + "' (want graphgpt, llaga or hop_field)");
  if (o.record_template == "hop_field") {
    if (o.task != InstructionTask::kNodeClassification)
      fail("--template",
           "not supported yet: --template hop_field builds node_classification records (its hop field is computed "
           "over every citation of the graph, which link prediction must hold out)");
    if (o.hops < 1 || o.hops > kMaxFieldHops)
      fail("--hops", "must be in [1, " + std::to_string(kMaxFieldHops) + "] with --template hop_field, got " +
                         std::to_string(o.hops));
    if (o.max_nodes != 0)
      fail("--max-nodes", "must be 0 with --template hop_field (its graph is the centre once a hop), got " +
                              std::to_string(o.max_nodes));
  }
  if (o.record_template == "llaga") {
    if (o.task != InstructionTask::kNodeClassification)
      fail("--template",
           "not supported yet: --template llaga builds node_classification records (graph_matching / "
           "link_prediction keep GraphGPT's subgraphs)");
    if (o.hops < 1) fail("--hops", "must be >= 1 with --template llaga, got " + std::to_string(o.hops));
    if (template_tree_slots(o.hops, o.fanout) == 0) {
      // The exact count where it fits, so the message says how far over the limit it is.
      uint64_t slots = 1, level = 1;
      bool huge = false;
      for (int32_t h = 0; h < o.hops && !huge; ++h) {
        level *= static_cast<uint64_t>(o.fanout);
        slots += level;
        huge = level > (uint64_t{1} << 50);
      }
      fail("--fanout", "--template llaga with --hops " + std::to_string(o.hops) + " and --fanout " +
                           std::to_string(o.fanout) + " makes a tree of " +
                           (huge ? std::string("over 10^15") : std::to_string(slots)) + " slots, more than " +
                           std::to_string(kMaxTemplateSlots) + " (each slot is a graph token of every prompt)");
    }
    if (o.max_nodes != 0)
      fail("--max-nodes", "must be 0 with --template llaga (its tree of " +
                              std::to_string(template_tree_slots(o.hops, o.fanout)) + " slots has a fixed shape), got " +
                              std::to_string(o.max_nodes));
  }
}

namespace {

uint64_t mix64(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A generator for one purpose of one record: records do not depend on each other's draws.
Rng stream(uint64_t seed, uint64_t purpose, uint64_t a = 0, uint64_t b = 0) {
  return Rng(mix64(mix64(mix64(seed ^ purpose) ^ a) ^ b));
}

enum : uint64_t { kSubset = 1, kSample = 2, kShuffle = 3, kPositives = 4, kNegatives = 5, kOrder = 6, kFlip = 7 };

template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(static_cast<uint32_t>(i))]);
}

GraphRef to_built(const Subgraph& s, int32_t max_nodes) {
  GraphRef b;
  b.node_idx = s.center;
  b.node_list.assign(s.node_list.begin(), s.node_list.end());
  const bool cap = max_nodes > 0 && static_cast<int32_t>(s.node_list.size()) > max_nodes;
  if (cap) b.node_list.resize(static_cast<size_t>(max_nodes));
  for (size_t k = 0; k < s.edge_index[0].size(); ++k) {
    if (cap && (s.edge_index[0][k] >= max_nodes || s.edge_index[1][k] >= max_nodes)) continue;
    b.edge_index[0].push_back(s.edge_index[0][k]);
    b.edge_index[1].push_back(s.edge_index[1][k]);
  }
  return b;
}

// `adj` without the pair {u, v} in either direction.
Csr without_pair(const Csr& adj, int32_t u, int32_t v) {
  Csr out;
  const int32_t n = static_cast<int32_t>(adj.offsets.size()) - 1;
  out.offsets.reserve(adj.offsets.size());
  out.targets.reserve(adj.targets.size());
  out.offsets.push_back(0);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t t : adj.row(i))
      if (!((i == u && t == v) || (i == v && t == u))) out.targets.push_back(t);
    out.offsets.push_back(static_cast<int64_t>(out.targets.size()));
  }
  return out;
}

std::string record_id(const TextGraph& g, SplitPart p, const std::string& rest) {
  return g.name + "_" + split_part_name(p) + "_" + rest;
}

std::string class_list(const TextGraph& g) {
  std::string s;
  for (int32_t k = 0; k < g.num_classes(); ++k) s += (k ? ", " : "") + g.class_names[k];
  return s;
}

}  // namespace

std::vector<BuiltInstruction> build_instructions(const TextGraph& g, const InstructionBuildOptions& o) {
  validate(o);
  if (g.undirected_adj.offsets.size() != g.nodes.size() + 1)
    fail("build_instructions", "the graph's adjacency is not built (TextGraph::build_adjacency)");
  if (g.name.empty() || g.name.find('_') != std::string::npos)
    fail("build_instructions", "graph name '" + g.name + "' must be non-empty without '_' (it prefixes record ids)");
  const LinkSplit links = split_links(g, o.edge_val_frac, o.edge_test_frac, o.split_seed);
  const TextGraph sg = sampling_graph(g, links);
  const char* split = split_part_name(o.split);
  std::vector<BuiltInstruction> out;

  if (o.task != InstructionTask::kLinkPrediction) {
    const NodeSplit ns = split_nodes(g, o.train_frac, o.val_frac, o.split_seed);
    std::vector<int32_t> centres =
        o.split == SplitPart::kTrain ? ns.train : o.split == SplitPart::kVal ? ns.val : ns.test;
    if (centres.empty())
      fail("--split", std::string("the ") + split + " split of graph '" + g.name + "' has no nodes (see --train-frac, --val-frac)");
    if (o.max_records > 0 && static_cast<size_t>(o.max_records) < centres.size()) {
      Rng rng = stream(o.seed, kSubset);
      shuffle(centres, rng);
      centres.resize(static_cast<size_t>(o.max_records));
      std::sort(centres.begin(), centres.end());
    }
    if (o.task == InstructionTask::kGraphMatching)
      for (int32_t c : centres)
        if (g.nodes[c].title.empty())
          fail("--task", "graph matching pairs graph tokens with node titles, and node " + std::to_string(c) +
                             " of graph '" + g.name + "' has none");
    const std::string classes = class_list(g);
    out.reserve(centres.size());
    for (int32_t c : centres) {
      Rng rng = stream(o.seed, kSample, static_cast<uint64_t>(c));
      BuiltInstruction r;
      r.id = record_id(g, o.split, std::to_string(c));
      r.dataset = g.name;
      r.graphs.push_back(o.record_template == "llaga"       ? to_built(sample_template_tree(sg, c, o.hops, o.fanout, rng), 0)
                         : o.record_template == "hop_field" ? to_built(hop_field_graph(c, o.hops), 0)
                                                            : to_built(sample_subgraph(sg, c, o.hops, o.fanout, rng), o.max_nodes));
      const GraphRef& b = r.graphs[0];
      std::string q, a;
      if (o.task == InstructionTask::kGraphMatching) {
        std::vector<int64_t> shuffled = b.node_list;
        Rng srng = stream(o.seed, kShuffle, static_cast<uint64_t>(c));
        shuffle(shuffled, srng);
        q = kGraphMatchingQuestionHead;
        for (size_t k = 0; k < shuffled.size(); ++k)
          q += (k ? ", " : "") + std::to_string(k + 1) + ". " + g.nodes[shuffled[k]].title;
        q += kGraphMatchingQuestionTail;
        a = kGraphMatchingAnswerHead;
        for (size_t k = 0; k < b.node_list.size(); ++k)
          a += (k ? ", " : "") + std::string("Graph token ") + std::to_string(k + 1) + " corresponds to " +
               g.nodes[b.node_list[k]].title;
        a += ".";
      } else {
        const Node& v = g.nodes[c];
        r.label = v.label;
        // A graph of features alone (no titles, no texts) asks from the graph tokens alone.
        q = "Given a citation graph: \n<graph>\nwhere the 0th node is the target paper";
        if (v.title.empty() && v.text.empty()) q += ".\n";
        else q += ", with the following information: \nTitle: " + v.title + "\n";
        if (!v.text.empty()) q += "Text: " + v.text + "\n";
        q += "Question: Which of the following categories does this paper belong to: " + classes +
             "? Give the most likely category of this paper directly, answering with its name exactly as listed.";
        a = g.class_names[v.label];
      }
      r.conversations = {{"human", std::move(q)}, {"gpt", std::move(a)}};
      out.push_back(std::move(r));
    }
    return out;
  }

  // Link prediction.
  // Positives are unordered pairs: a reciprocal citation is held out as two directed edges, and
  // is still one question (and one record id).
  std::vector<std::pair<int32_t, int32_t>> pos;
  {
    std::set<std::pair<int32_t, int32_t>> seen;
    for (const auto& e : links.edges(o.split))
      if (seen.emplace(std::min(e.first, e.second), std::max(e.first, e.second)).second) pos.push_back(e);
  }
  if (pos.empty())
    fail("--split", std::string("the ") + split + " split of graph '" + g.name +
                        "' has no edges (see --edge-val-frac, --edge-test-frac)");
  {
    Rng rng = stream(o.seed, kPositives);
    shuffle(pos, rng);
  }
  size_t n_pos = pos.size();
  if (o.max_records > 0) n_pos = std::min(n_pos, static_cast<size_t>(o.max_records / 2));
  if (n_pos == 0) fail("--max-records", "link prediction needs at least 2 records (one yes, one no)");
  pos.resize(n_pos);

  std::set<std::pair<int32_t, int32_t>> linked;  // unordered pairs of the whole graph
  for (const auto& e : g.edges) linked.emplace(std::min(e.first, e.second), std::max(e.first, e.second));
  std::vector<std::pair<int32_t, int32_t>> neg;
  {
    std::set<std::pair<int32_t, int32_t>> taken;
    Rng rng = stream(o.seed, kNegatives);
    const uint32_t n = static_cast<uint32_t>(g.num_nodes());
    const uint64_t max_attempts = 1000 * static_cast<uint64_t>(n_pos) + 100000;
    for (uint64_t attempt = 0; neg.size() < n_pos && attempt < max_attempts && n > 1; ++attempt) {
      const int32_t u = static_cast<int32_t>(rng.below(n)), v = static_cast<int32_t>(rng.below(n));
      if (u == v) continue;
      const std::pair<int32_t, int32_t> key(std::min(u, v), std::max(u, v));
      if (linked.count(key) || pair_part(links, u, v) != o.split || !taken.insert(key).second) continue;
      neg.emplace_back(u, v);
    }
    if (neg.size() < n_pos)
      fail("--split", "could not draw " + std::to_string(n_pos) + " negative pairs for the " + split +
                          " split of graph '" + g.name + "' (the graph is too small or too dense)");
  }

  struct Pair {
    int32_t a, b, label;
  };
  std::vector<Pair> pairs;
  pairs.reserve(2 * n_pos);
  {
    Rng flip = stream(o.seed, kFlip);
    for (const auto& e : pos) {
      if (flip.below(2)) pairs.push_back({e.second, e.first, 1});
      else pairs.push_back({e.first, e.second, 1});
    }
  }
  for (const auto& e : neg) pairs.push_back({e.first, e.second, 0});
  {
    Rng rng = stream(o.seed, kOrder);
    shuffle(pairs, rng);
  }

  // A structure-only copy of the sampling graph, whose adjacency loses a training positive while
  // that positive's subgraphs are drawn.
  TextGraph masked;
  masked.nodes.resize(sg.nodes.size());
  for (size_t i = 0; i < sg.nodes.size(); ++i) masked.nodes[i].id = static_cast<int32_t>(i);
  out.reserve(pairs.size());
  for (const Pair& p : pairs) {
    const bool mask = p.label == 1 && o.split == SplitPart::kTrain;
    const TextGraph* from = &sg;
    if (mask) {
      masked.undirected_adj = without_pair(sg.undirected_adj, p.a, p.b);
      from = &masked;
    }
    Rng rng = stream(o.seed, kSample, static_cast<uint64_t>(p.a) << 32 | static_cast<uint32_t>(p.b), 1);
    BuiltInstruction r;
    r.id = record_id(g, o.split, std::to_string(p.a) + "_" + std::to_string(p.b) + "_LP");
    r.dataset = g.name;
    r.graphs.push_back(to_built(sample_subgraph(*from, p.a, o.hops, o.fanout, rng), o.max_nodes));
    r.graphs.push_back(to_built(sample_subgraph(*from, p.b, o.hops, o.fanout, rng), o.max_nodes));
    r.label = p.label;
    r.conversations = {{"human", kLinkPredictionQuestion}, {"gpt", p.label ? "yes" : "no"}};
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<InstructionRecord> records_of(const std::vector<BuiltInstruction>& built) {
  return std::vector<InstructionRecord>(built.begin(), built.end());
}

}  // namespace gt
