// GraphGPT instruction records (data/instruction_builder.hpp), held-out links
// (data/link_split.hpp) and the Cora-ML loader (data/cora_ml.hpp): schema, determinism, and
// that nothing of the evaluation splits leaks into training records. LLaGA's neighbour trees
// (--template llaga): the exact tree on a hand-made graph, the draws, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.hpp"
#include "common/template_tree.hpp"
#include "data/cora_ml.hpp"
#include "data/instruction_builder.hpp"
#include "data/link_split.hpp"
#include "data/synthetic_graph.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::BuiltInstruction;
using gt::InstructionBuildOptions;
using gt::InstructionTask;
using gt::SplitPart;
using Pair = std::pair<int32_t, int32_t>;

const gt::TextGraph& small_graph() {
  static const gt::TextGraph g = [] {
    gt::SyntheticGraphParams p;
    p.nodes = 400;
    p.seed = 5;
    return gt::make_synthetic_graph(p);
  }();
  return g;
}

InstructionBuildOptions opts(InstructionTask t, SplitPart s, uint64_t seed = 42) {
  InstructionBuildOptions o;
  o.task = t;
  o.split = s;
  o.seed = seed;
  return o;
}

const InstructionTask kTasks[] = {InstructionTask::kGraphMatching, InstructionTask::kNodeClassification,
                                  InstructionTask::kLinkPrediction};
const SplitPart kParts[] = {SplitPart::kTrain, SplitPart::kVal, SplitPart::kTest};

Pair unordered(int32_t a, int32_t b) { return {std::min(a, b), std::max(a, b)}; }

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Checks one record's JSON against GraphGPT's schema exactly (keys, order, types, ranges).
void expect_schema(const nlohmann::ordered_json& r, bool lp, int32_t num_nodes) {
  ASSERT_TRUE(r.is_object());
  std::vector<std::string> keys;
  for (auto it = r.begin(); it != r.end(); ++it) keys.push_back(it.key());
  ASSERT_EQ(keys, (std::vector<std::string>{"id", "graph", "conversations"}));
  ASSERT_TRUE(r["id"].is_string());
  const std::string id = r["id"];
  const auto& g = r["graph"];
  ASSERT_TRUE(g.is_object());
  std::vector<std::string> gkeys;
  for (auto it = g.begin(); it != g.end(); ++it) gkeys.push_back(it.key());
  std::vector<std::string> suffixes = lp ? std::vector<std::string>{"_1", "_2"} : std::vector<std::string>{""};
  std::vector<std::string> want;
  for (const auto& s : suffixes)
    for (const char* k : {"node_idx", "edge_index", "node_list"}) want.push_back(k + s);
  ASSERT_EQ(gkeys, want) << id;
  for (const auto& s : suffixes) {
    ASSERT_TRUE(g["node_idx" + s].is_number_integer());
    const auto& nl = g["node_list" + s];
    const auto& ei = g["edge_index" + s];
    ASSERT_TRUE(nl.is_array());
    ASSERT_FALSE(nl.empty());
    EXPECT_EQ(nl[0], g["node_idx" + s]) << id << ": centre first";
    std::set<int64_t> distinct;
    for (const auto& v : nl) {
      ASSERT_TRUE(v.is_number_integer());
      EXPECT_TRUE(v >= 0 && v < num_nodes);
      distinct.insert(v.get<int64_t>());
    }
    EXPECT_EQ(distinct.size(), nl.size()) << id << ": node_list repeats a node";
    ASSERT_TRUE(ei.is_array());
    ASSERT_EQ(ei.size(), 2u);
    ASSERT_EQ(ei[0].size(), ei[1].size());
    for (int k = 0; k < 2; ++k)
      for (const auto& v : ei[k]) {
        ASSERT_TRUE(v.is_number_integer());
        EXPECT_TRUE(v >= 0 && v < static_cast<int64_t>(nl.size())) << id << ": edge_index is local";
      }
  }
  const auto& c = r["conversations"];
  ASSERT_TRUE(c.is_array());
  ASSERT_EQ(c.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    std::vector<std::string> ck;
    for (auto it = c[k].begin(); it != c[k].end(); ++it) ck.push_back(it.key());
    ASSERT_EQ(ck, (std::vector<std::string>{"from", "value"}));
    ASSERT_TRUE(c[k]["value"].is_string());
  }
  EXPECT_EQ(c[0]["from"], "human");
  EXPECT_EQ(c[1]["from"], "gpt");
  EXPECT_EQ(count_of(c[0]["value"].get<std::string>(), "<graph>"), lp ? 2u : 1u) << id;
  EXPECT_EQ(count_of(c[1]["value"].get<std::string>(), "<graph>"), 0u) << id;
  if (lp) {
    EXPECT_EQ(id.substr(id.size() - 3), "_LP");
  }
}

TEST(InstructionBuilder, SchemaIsGraphGptsExactly) {
  const auto& g = small_graph();
  for (InstructionTask t : kTasks)
    for (SplitPart s : {SplitPart::kTrain, SplitPart::kTest}) {
      auto o = opts(t, s);
      o.max_records = 20;
      auto recs = gt::build_instructions(g, o);
      ASSERT_FALSE(recs.empty());
      const std::string text = gt::instructions_json(gt::records_of(recs), "test");
      auto j = nlohmann::ordered_json::parse(text);
      ASSERT_TRUE(j.is_array());
      ASSERT_EQ(j.size(), recs.size());
      std::set<std::string> ids;
      for (size_t i = 0; i < j.size(); ++i) {
        expect_schema(j[i], t == InstructionTask::kLinkPrediction, g.num_nodes());
        const std::string id = j[i]["id"];
        EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
        const std::string prefix = std::string("synth_") + gt::split_part_name(s) + "_";
        EXPECT_EQ(id.compare(0, prefix.size(), prefix), 0) << id;
        if (t != InstructionTask::kLinkPrediction)
          EXPECT_EQ(id, prefix + std::to_string(j[i]["graph"]["node_idx"].get<int>()));
      }
    }
}

TEST(InstructionBuilder, DeterministicBySeed) {
  const auto& g = small_graph();
  for (InstructionTask t : kTasks) {
    auto o = opts(t, SplitPart::kTrain, 7);
    o.max_records = 30;
    const std::string a = gt::instructions_json(gt::records_of(gt::build_instructions(g, o)), "test");
    const std::string b = gt::instructions_json(gt::records_of(gt::build_instructions(g, o)), "test");
    EXPECT_EQ(a, b) << gt::instruction_task_name(t);
    o.seed = 8;
    const std::string c = gt::instructions_json(gt::records_of(gt::build_instructions(g, o)), "test");
    EXPECT_NE(a, c) << gt::instruction_task_name(t);
  }
}

TEST(InstructionBuilder, TestCentresAreNeverTrainingCentres) {
  const auto& g = small_graph();
  for (InstructionTask t : {InstructionTask::kGraphMatching, InstructionTask::kNodeClassification}) {
    std::map<SplitPart, std::set<int32_t>> centres;
    for (SplitPart s : kParts)
      for (uint64_t seed : {1u, 2u})  // --seed changes sampling, never the split
        for (const auto& r : gt::build_instructions(g, opts(t, s, seed))) centres[s].insert(r.graphs[0].node_idx);
    EXPECT_EQ(centres[SplitPart::kTrain].size() + centres[SplitPart::kVal].size() + centres[SplitPart::kTest].size(),
              static_cast<size_t>(g.num_nodes()));
    for (int32_t c : centres[SplitPart::kTest]) {
      EXPECT_FALSE(centres[SplitPart::kTrain].count(c)) << c;
      EXPECT_FALSE(centres[SplitPart::kVal].count(c)) << c;
    }
    for (int32_t c : centres[SplitPart::kVal]) EXPECT_FALSE(centres[SplitPart::kTrain].count(c)) << c;
  }
}

TEST(InstructionBuilder, HeldOutLinksNeverAppearInAnySubgraph) {
  const auto& g = small_graph();
  const InstructionBuildOptions d;
  const gt::LinkSplit ls = gt::split_links(g, d.edge_val_frac, d.edge_test_frac, d.split_seed);
  std::set<Pair> held, train;
  for (const auto& e : ls.val) held.insert(unordered(e.first, e.second));
  for (const auto& e : ls.test) held.insert(unordered(e.first, e.second));
  for (const auto& e : ls.train) train.insert(unordered(e.first, e.second));
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(ls.train.size() + ls.val.size() + ls.test.size(), g.edges.size());
  for (const Pair& p : held) EXPECT_FALSE(train.count(p)) << "a reciprocal pair is split";

  // The sampling graph has none of them, in either direction.
  const gt::TextGraph sg = gt::sampling_graph(g, ls);
  for (int32_t u = 0; u < sg.num_nodes(); ++u)
    for (int32_t v : sg.undirected_adj.row(u)) EXPECT_FALSE(held.count(unordered(u, v))) << u << " " << v;

  std::set<Pair> all;
  for (const auto& e : g.edges) all.insert(unordered(e.first, e.second));
  size_t checked = 0;
  for (InstructionTask t : kTasks)
    for (SplitPart s : kParts) {
      for (const auto& r : gt::build_instructions(g, opts(t, s))) {
        for (const auto& b : r.graphs)
          for (size_t k = 0; k < b.edge_index[0].size(); ++k) {
            const int32_t u = b.node_list[b.edge_index[0][k]], v = b.node_list[b.edge_index[1][k]];
            const Pair p = unordered(u, v);
            EXPECT_TRUE(all.count(p)) << r.id << ": not an edge of the graph";
            EXPECT_FALSE(held.count(p)) << r.id << ": held-out link " << u << "-" << v;
            // A link-prediction training positive is not visible in its own subgraphs either.
            if (t == InstructionTask::kLinkPrediction && s == SplitPart::kTrain && r.label == 1)
              EXPECT_NE(p, unordered(r.graphs[0].node_idx, r.graphs[1].node_idx)) << r.id;
            ++checked;
          }
      }
    }
  EXPECT_GT(checked, 10000u);
}

TEST(InstructionBuilder, LinkPredictionIsBalancedAndSplitByLinks) {
  const auto& g = small_graph();
  const InstructionBuildOptions d;
  const gt::LinkSplit ls = gt::split_links(g, d.edge_val_frac, d.edge_test_frac, d.split_seed);
  std::set<Pair> all;
  for (const auto& e : g.edges) all.insert(unordered(e.first, e.second));
  std::map<SplitPart, std::set<Pair>> pos, neg;
  for (SplitPart s : kParts) {
    std::set<Pair> part_edges;
    for (const auto& e : ls.edges(s)) part_edges.insert(unordered(e.first, e.second));
    auto recs = gt::build_instructions(g, opts(InstructionTask::kLinkPrediction, s));
    size_t yes = 0;
    for (const auto& r : recs) {
      const Pair p = unordered(r.graphs[0].node_idx, r.graphs[1].node_idx);
      EXPECT_EQ(r.conversations[1].value, r.label ? "yes" : "no");
      if (r.label == 1) {
        ++yes;
        EXPECT_TRUE(part_edges.count(p)) << r.id << ": a positive of another split";
        pos[s].insert(p);
      } else {
        EXPECT_FALSE(all.count(p)) << r.id << ": a negative that is an edge";
        EXPECT_EQ(gt::pair_part(ls, p.first, p.second), s);
        EXPECT_TRUE(neg[s].insert(p).second) << r.id << ": repeated negative";
      }
    }
    EXPECT_EQ(2 * yes, recs.size()) << gt::split_part_name(s);
    std::printf("[stats] link_prediction %s: %zu records, %zu yes / %zu no\n", gt::split_part_name(s), recs.size(), yes,
                recs.size() - yes);
  }
  for (const Pair& p : pos[SplitPart::kTest]) EXPECT_FALSE(pos[SplitPart::kTrain].count(p));
  for (const Pair& p : neg[SplitPart::kTest]) EXPECT_FALSE(neg[SplitPart::kTrain].count(p));

  // --max-records stays balanced.
  auto o = opts(InstructionTask::kLinkPrediction, SplitPart::kTrain);
  o.max_records = 51;
  auto recs = gt::build_instructions(g, o);
  ASSERT_EQ(recs.size(), 50u);
  EXPECT_EQ(std::count_if(recs.begin(), recs.end(), [](const BuiltInstruction& r) { return r.label == 1; }), 25);
}

TEST(InstructionBuilder, GraphMatchingListsTheSubgraphTitles) {
  const auto& g = small_graph();
  for (int32_t cap : {0, 5}) {
    auto o = opts(InstructionTask::kGraphMatching, SplitPart::kTrain);
    o.max_nodes = cap;
    size_t shuffled = 0, n = 0;
    for (const auto& r : gt::build_instructions(g, o)) {
      const auto& b = r.graphs[0];
      if (cap) EXPECT_LE(b.node_list.size(), static_cast<size_t>(cap));
      // Answer: node_list's titles in order.
      std::string want = gt::kGraphMatchingAnswerHead;
      for (size_t k = 0; k < b.node_list.size(); ++k)
        want += (k ? ", " : "") + std::string("Graph token ") + std::to_string(k + 1) + " corresponds to " +
                g.nodes[b.node_list[k]].title;
      EXPECT_EQ(r.conversations[1].value, want + ".");
      // Question: the same titles, numbered, in some order.
      const std::string& q = r.conversations[0].value;
      const std::string head = gt::kGraphMatchingQuestionHead, tail = gt::kGraphMatchingQuestionTail;
      ASSERT_EQ(q.compare(0, head.size(), head), 0);
      ASSERT_EQ(q.compare(q.size() - tail.size(), tail.size(), tail), 0);
      std::string list = q.substr(head.size(), q.size() - head.size() - tail.size());
      std::vector<std::string> titles, listed;
      for (int32_t v : b.node_list) titles.push_back(g.nodes[v].title);
      size_t pos = 0;
      for (size_t k = 1; k <= titles.size(); ++k) {
        const std::string num = std::to_string(k) + ". ";
        ASSERT_EQ(list.compare(pos, num.size(), num), 0) << r.id;
        pos += num.size();
        // Titles never contain ", <digit>. " so the next item starts there.
        size_t next = k < titles.size() ? list.find(", " + std::to_string(k + 1) + ". ", pos) : list.size();
        ASSERT_NE(next, std::string::npos);
        listed.push_back(list.substr(pos, next - pos));
        pos = next + 2;
      }
      if (listed != titles) ++shuffled;
      ++n;
      std::sort(listed.begin(), listed.end());
      std::sort(titles.begin(), titles.end());
      EXPECT_EQ(listed, titles) << r.id;
    }
    EXPECT_GT(shuffled, n / 2) << "titles are listed shuffled";
  }
}

TEST(InstructionBuilder, NodeClassificationAnswersTheClassName) {
  const auto& g = small_graph();
  for (const auto& r : gt::build_instructions(g, opts(InstructionTask::kNodeClassification, SplitPart::kTest))) {
    const gt::Node& v = g.nodes[r.graphs[0].node_idx];
    EXPECT_EQ(r.label, v.label);
    EXPECT_EQ(r.conversations[1].value, g.class_names[v.label]);
    EXPECT_NE(r.conversations[0].value.find("Title: " + v.title + "\n"), std::string::npos);
    for (const auto& name : g.class_names) EXPECT_NE(r.conversations[0].value.find(name), std::string::npos);
  }
}

TEST(InstructionBuilder, BadOptionsNameTheFlag) {
  const auto& g = small_graph();
  auto err = [&](InstructionBuildOptions o) { return gt::test::input_error_of([&] { gt::build_instructions(g, o); }); };
  InstructionBuildOptions o;
  o.train_frac = 1.5;
  EXPECT_NE(err(o).find("--train-frac"), std::string::npos) << err(o);
  o = {};
  o.val_frac = -0.1;
  EXPECT_NE(err(o).find("--val-frac"), std::string::npos);
  o = {};
  o.train_frac = 0.7;
  o.val_frac = 0.4;
  EXPECT_NE(err(o).find("more than 1"), std::string::npos);
  o = {};
  o.edge_test_frac = 2;
  EXPECT_NE(err(o).find("--edge-test-frac"), std::string::npos);
  o = {};
  o.train_frac = 1;
  o.val_frac = 0;
  o.split = SplitPart::kTest;
  EXPECT_NE(err(o).find("--split"), std::string::npos);
  EXPECT_NE(gt::test::input_error_of([] { gt::parse_instruction_task("captioning"); }).find("--task"),
            std::string::npos);
  EXPECT_NE(gt::test::input_error_of([] { gt::parse_split_part("dev"); }).find("--split"), std::string::npos);
  EXPECT_NE(gt::test::input_error_of([] { gt::load_graph("/nonexistent/graph"); }).find("/nonexistent/graph"),
            std::string::npos);
}

// A hand-made citation graph whose trees are worked out by hand below. Undirected neighbours,
// in adjacency (ascending) order:
//   0: 1 2      1: 0 3      2: 0 4 5 6 7      3: 1      4, 5, 6, 7: 2
// Node 2 has more neighbours than a fanout of 3; every other node has at most 2.
const gt::TextGraph& hand_graph() {
  static const gt::TextGraph g = [] {
    gt::TextGraph h;
    h.name = "hand";
    h.class_names = {"alpha", "beta"};
    h.class_descriptions = {"a", "b"};
    for (int32_t i = 0; i < 8; ++i) h.nodes.push_back({i, i % 2, "paper " + std::to_string(i), "text " + std::to_string(i)});
    h.edges = {{0, 1}, {2, 0}, {1, 3}, {2, 4}, {5, 2}, {2, 6}, {7, 2}};
    h.feature_dim = 1;
    h.features.assign(8, 0.5f);
    h.build_adjacency();
    gt::check_text_graph(h, "hand graph");
    return h;
  }();
  return g;
}

// Every node a training centre, no link held out: the trees are drawn from the whole graph.
InstructionBuildOptions llaga_opts(int32_t hops, int32_t fanout, uint64_t seed = 42) {
  InstructionBuildOptions o = opts(InstructionTask::kNodeClassification, SplitPart::kTrain, seed);
  o.record_template = "llaga";
  o.hops = hops;
  o.fanout = fanout;
  o.train_frac = 1;
  o.val_frac = 0;
  o.edge_val_frac = o.edge_test_frac = 0;
  return o;
}

const BuiltInstruction& record_of(const std::vector<BuiltInstruction>& recs, int64_t centre) {
  for (const auto& r : recs)
    if (r.graphs[0].node_idx == centre) return r;
  throw std::runtime_error("no record for centre " + std::to_string(centre));
}

using Ids = std::vector<int64_t>;

TEST(LlagaTemplate, TreeOfAHandMadeGraphIsExact) {
  const auto recs = gt::build_instructions(hand_graph(), llaga_opts(2, 3));
  ASSERT_EQ(recs.size(), 8u);
  EXPECT_EQ(gt::template_tree_slots(2, 3), 13);
  EXPECT_EQ(gt::template_tree_slots(2, 10), 111);

  // Centre 3: its one neighbour (1), then two pads; 1's neighbours are 0 and 3 (the centre again,
  // a real slot) then a pad; the pads' children are pads. Pads hold the centre's id.
  const gt::GraphRef& t = record_of(recs, 3).graphs[0];
  EXPECT_EQ(t.node_idx, 3);
  EXPECT_EQ(t.node_list, (Ids{3, /*hop 1*/ 1, 3, 3, /*under 1*/ 0, 3, 3, /*under pads*/ 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(t.edge_index[0], (Ids{0, 1, 1, 1, 4, 5}));
  EXPECT_EQ(t.edge_index[1], (Ids{1, 0, 4, 5, 1, 1}));

  // Centre 0 with fanout 5: every node has at most 5 neighbours, so nothing is drawn and the
  // whole tree follows adjacency order. 31 slots: 1 + 5 + 25.
  const auto wide = gt::build_instructions(hand_graph(), llaga_opts(2, 5));
  const gt::GraphRef& w = record_of(wide, 0).graphs[0];
  ASSERT_EQ(static_cast<int64_t>(w.node_list.size()), gt::template_tree_slots(2, 5));
  Ids want = {0, 1, 2, 0, 0, 0, /*under 1*/ 0, 3, 0, 0, 0, /*under 2*/ 0, 4, 5, 6, 7};
  want.resize(31, 0);  // under the three pads of hop 1
  EXPECT_EQ(w.node_list, want);
  std::vector<Pair> edges;
  for (size_t k = 0; k < w.edge_index[0].size(); ++k)
    edges.emplace_back(static_cast<int32_t>(w.edge_index[0][k]), static_cast<int32_t>(w.edge_index[1][k]));
  EXPECT_EQ(edges, (std::vector<Pair>{{0, 1},  {0, 2},  {1, 0},  {1, 6},  {1, 7},  {2, 0},  {2, 11}, {2, 12},
                                      {2, 13}, {2, 14}, {2, 15}, {6, 1},  {7, 1},  {11, 2}, {12, 2}, {13, 2},
                                      {14, 2}, {15, 2}}));

  // The question is node classification's, about the centre, as with GraphGPT's subgraphs.
  const BuiltInstruction& r = record_of(recs, 3);
  EXPECT_EQ(r.id, "hand_train_3");
  EXPECT_EQ(r.label, 1);
  EXPECT_EQ(r.conversations[1].value, "beta");
  EXPECT_NE(r.conversations[0].value.find("Title: paper 3\nText: text 3\n"), std::string::npos);

  // Repeated node ids and pads are valid GraphGPT records: written and read back unchanged.
  const std::string text = gt::instructions_json(gt::records_of(recs), "llaga.json");
  const auto back = gt::read_instructions_text(text, "llaga.json");
  ASSERT_EQ(back.size(), recs.size());
  EXPECT_EQ(back[3].graphs[0].node_list, recs[3].graphs[0].node_list);
  EXPECT_EQ(back[3].graphs[0].edge_index, recs[3].graphs[0].edge_index);
}

TEST(LlagaTemplate, DrawsDistinctNeighboursBySeed) {
  // Centre 0, fanout 3: node 2 (slot 2) has 5 neighbours, so slots 7..9 are 3 of them drawn;
  // the rest of the tree is fixed.
  std::set<Ids> draws;
  std::string first;
  for (uint64_t seed : {42, 43, 44, 45, 46, 47}) {
    const auto recs = gt::build_instructions(hand_graph(), llaga_opts(2, 3, seed));
    const gt::GraphRef& t = record_of(recs, 0).graphs[0];
    ASSERT_EQ(t.node_list.size(), 13u);
    const Ids drawn(t.node_list.begin() + 7, t.node_list.begin() + 10);
    Ids fixed = t.node_list;
    std::fill(fixed.begin() + 7, fixed.begin() + 10, -1);
    EXPECT_EQ(fixed, (Ids{0, 1, 2, 0, 0, 3, 0, -1, -1, -1, 0, 0, 0})) << seed;
    EXPECT_EQ(std::set<int64_t>(drawn.begin(), drawn.end()).size(), 3u) << seed << ": drawn without replacement";
    for (int64_t v : drawn) EXPECT_TRUE(v == 0 || (v >= 4 && v <= 7)) << seed << ": " << v << " is not a neighbour of 2";
    EXPECT_EQ(t.edge_index[0], (Ids{0, 0, 1, 1, 1, 2, 2, 2, 2, 4, 5, 7, 8, 9})) << seed;
    EXPECT_EQ(t.edge_index[1], (Ids{1, 2, 0, 4, 5, 0, 7, 8, 9, 1, 1, 2, 2, 2})) << seed;
    draws.insert(drawn);

    const std::string a = gt::instructions_json(gt::records_of(recs), "a.json");
    EXPECT_EQ(a, gt::instructions_json(gt::records_of(gt::build_instructions(hand_graph(), llaga_opts(2, 3, seed))),
                                       "a.json"))
        << seed << ": the same seed gives the same bytes";
    if (seed == 42) first = a;
    else EXPECT_NE(a, first) << seed << ": another seed draws again";
  }
  EXPECT_GE(draws.size(), 3u);

  // The sampler itself, on a generator of its own: a tree of hops 1 is the centre's neighbours.
  gt::Rng rng(9);
  const gt::Subgraph s = gt::sample_template_tree(hand_graph(), 2, 1, 4, rng);
  ASSERT_EQ(s.node_list.size(), 5u);
  EXPECT_EQ(s.node_list[0], 2);
  EXPECT_EQ(std::set<int32_t>(s.node_list.begin() + 1, s.node_list.end()).size(), 4u);
  EXPECT_EQ(s.edge_index[0], (std::vector<int32_t>{0, 0, 0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(s.edge_index[1], (std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0}));
}

TEST(LlagaTemplate, TreesOfALargerGraphKeepTheirShapeAndLeakNothing) {
  const auto& g = small_graph();
  const InstructionBuildOptions d;
  const gt::LinkSplit ls = gt::split_links(g, d.edge_val_frac, d.edge_test_frac, d.split_seed);
  const gt::TextGraph sg = gt::sampling_graph(g, ls);
  auto o = opts(InstructionTask::kNodeClassification, SplitPart::kTest);
  o.record_template = "llaga";
  const auto recs = gt::build_instructions(g, o);
  ASSERT_GT(recs.size(), 50u);
  size_t pads = 0, repeats = 0;
  for (const auto& r : recs) {
    const gt::GraphRef& t = r.graphs[0];
    ASSERT_EQ(t.node_list.size(), 111u) << r.id;
    EXPECT_EQ(t.node_list[0], t.node_idx);
    std::vector<int> touched(111, 0);
    for (size_t k = 0; k < t.edge_index[0].size(); ++k) {
      const int64_t a = t.edge_index[0][k], b = t.edge_index[1][k];
      ++touched[a];
      ++touched[b];
      const int64_t child = std::max(a, b), parent = std::min(a, b);
      ASSERT_EQ(parent, (child - 1) / 10) << r.id << ": edges join a slot and its parent only";
      const auto row = sg.undirected_adj.row(static_cast<int32_t>(t.node_list[parent]));
      EXPECT_TRUE(std::find(row.begin(), row.end(), static_cast<int32_t>(t.node_list[child])) != row.end())
          << r.id << ": slot " << child << " is not a neighbour of its parent in the sampling graph";
    }
    std::vector<bool> real(111);
    std::multiset<int64_t> in_real_slots;
    for (size_t i = 0; i < 111; ++i) {
      real[i] = i == 0 || touched[i] > 0;  // a pad is a slot i > 0 no edge touches
      if (real[i]) in_real_slots.insert(t.node_list[i]);
      else {
        ++pads;
        EXPECT_EQ(t.node_list[i], t.node_idx) << r.id << ": a pad holds the centre's id";
      }
    }
    for (size_t p = 0; p < 11; ++p) {
      // The real children of a real slot: min(fanout, degree) of them, first; then pads.
      const int32_t deg = sg.undirected_adj.degree(static_cast<int32_t>(t.node_list[p]));
      const size_t want = real[p] ? static_cast<size_t>(std::min(10, deg)) : 0;
      for (size_t k = 0; k < 10; ++k) EXPECT_EQ(real[1 + p * 10 + k], k < want) << r.id << ": slot " << 1 + p * 10 + k;
      if (real[p]) {
        std::set<int64_t> children(t.node_list.begin() + 1 + p * 10, t.node_list.begin() + 1 + p * 10 + want);
        EXPECT_EQ(children.size(), want) << r.id << ": a node's children are distinct neighbours";
      }
    }
    for (int64_t v : in_real_slots)
      if (in_real_slots.count(v) > 1) {
        ++repeats;
        break;
      }
  }
  EXPECT_GT(pads, 0u);
  EXPECT_GT(repeats, 0u) << "nodes already in the tree are drawn again (LLaGA excludes none)";
}

TEST(LlagaTemplate, RefusalsNameTheFlagBeforeAnyGraph) {
  auto err = [](InstructionBuildOptions o) { return gt::test::input_error_of([&] { gt::validate(o); }); };
  auto o = llaga_opts(2, 10);
  EXPECT_EQ(err(o), "(no error)");
  o.task = InstructionTask::kLinkPrediction;
  EXPECT_EQ(err(o),
            "--template: not supported yet: --template llaga builds node_classification records (graph_matching / "
            "link_prediction keep GraphGPT's subgraphs)");
  o.task = InstructionTask::kGraphMatching;
  EXPECT_NE(err(o).find("--template: not supported yet"), std::string::npos) << err(o);
  o = llaga_opts(2, 10);
  o.max_nodes = 24;
  EXPECT_NE(err(o).find("--max-nodes"), std::string::npos) << err(o);
  EXPECT_NE(err(o).find("111 slots"), std::string::npos) << err(o);
  o = llaga_opts(2, 10);
  o.record_template = "graphsage";
  EXPECT_NE(err(o).find("--template"), std::string::npos) << err(o);
  EXPECT_NE(err(o).find("graphgpt, llaga or hop_field"), std::string::npos) << err(o);
  o = llaga_opts(0, 10);
  EXPECT_NE(err(o).find("--hops"), std::string::npos) << err(o);
  o = llaga_opts(3, 20);  // 1 + 20 + 400 + 8000
  EXPECT_NE(err(o).find("--fanout"), std::string::npos) << err(o);
  EXPECT_NE(err(o).find("8421 slots, more than 4096"), std::string::npos) << err(o);
  o = llaga_opts(8, 1000);
  EXPECT_NE(err(o).find("over 10^15 slots"), std::string::npos) << err(o);
  EXPECT_EQ(err(llaga_opts(1, 1000)), "(no error)");  // 1001 slots
  EXPECT_EQ(err(llaga_opts(8, 2)), "(no error)");     // 511 slots
  // GraphGPT's subgraphs keep every task and --max-nodes.
  o = opts(InstructionTask::kLinkPrediction, SplitPart::kTrain);
  o.max_nodes = 24;
  EXPECT_EQ(err(o), "(no error)");
  // The sampler's own checks.
  gt::Rng rng(1);
  EXPECT_NE(gt::test::input_error_of([&] { gt::sample_template_tree(hand_graph(), 8, 2, 3, rng); }).find("outside"),
            std::string::npos);
  EXPECT_NE(gt::test::input_error_of([&] { gt::sample_template_tree(hand_graph(), 0, 0, 3, rng); }).find(">= 1"),
            std::string::npos);
  EXPECT_NE(gt::test::input_error_of([&] { gt::sample_template_tree(hand_graph(), 0, 3, 20, rng); }).find("4096"),
            std::string::npos);
}

// LLaGA's hop-field overview: the record's graph is its centre once a hop, nothing drawn.
TEST(HopFieldTemplate, RecordsAreTheCentreOnceAHopAndRefusalsNameTheFlag) {
  InstructionBuildOptions o = opts(InstructionTask::kNodeClassification, SplitPart::kTrain);
  o.record_template = "hop_field";
  o.hops = 4;
  const auto recs = gt::build_instructions(hand_graph(), o);
  ASSERT_FALSE(recs.empty());
  auto plain = opts(InstructionTask::kNodeClassification, SplitPart::kTrain);
  const auto same_papers = gt::build_instructions(hand_graph(), plain);
  ASSERT_EQ(recs.size(), same_papers.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& g = recs[i].graphs.at(0);
    EXPECT_EQ(recs[i].id, same_papers[i].id) << "the same papers, in the same order, as GraphGPT's records";
    EXPECT_EQ(g.node_list, std::vector<int64_t>(5, g.node_list.at(0))) << recs[i].id;
    EXPECT_TRUE(g.edge_index[0].empty() && g.edge_index[1].empty()) << recs[i].id;
  }
  auto err = [](InstructionBuildOptions b) { return gt::test::input_error_of([&] { gt::validate(b); }); };
  EXPECT_EQ(err(o), "(no error)");
  o.task = InstructionTask::kLinkPrediction;
  EXPECT_NE(err(o).find("--template: not supported yet: --template hop_field builds node_classification"), std::string::npos)
      << err(o);
  o.task = InstructionTask::kNodeClassification;
  o.hops = 0;
  EXPECT_NE(err(o).find("--hops: must be in [1, 32] with --template hop_field, got 0"), std::string::npos) << err(o);
  o.hops = 33;
  EXPECT_NE(err(o).find("--hops: must be in [1, 32] with --template hop_field, got 33"), std::string::npos) << err(o);
  // A subgraph template stops at 8 hops; the hop field reaches further.
  o.hops = static_cast<int>(gt::kMaxFieldHops);
  EXPECT_EQ(err(o), "(no error)");
  EXPECT_EQ(gt::build_instructions(hand_graph(), o).at(0).graphs.at(0).node_list.size(), size_t(gt::kMaxFieldHops + 1));
  o.hops = 4;
  o.max_nodes = 3;
  EXPECT_NE(err(o).find("--max-nodes: must be 0 with --template hop_field"), std::string::npos) << err(o);
}

TEST(CoraMl, LoadsTheSharedAsset) {
  GT_REQUIRE_ASSETS(assets);
  const std::string dir = assets + "/graph/cora_ml";
  if (!gt::is_directory(dir)) GTEST_SKIP() << dir << " not found: skipped";
  ASSERT_TRUE(gt::is_cora_ml_folder(dir));
  const gt::TextGraph g = gt::load_graph(dir);
  EXPECT_EQ(g.name, "cora");
  EXPECT_EQ(g.num_nodes(), 2995);
  EXPECT_EQ(g.edges.size(), 8416u);
  EXPECT_EQ(g.num_classes(), 7);
  EXPECT_EQ(g.class_names[4], "Neural_Networks");
  EXPECT_EQ(g.class_descriptions[4], "Artificial_Intelligence/Machine_Learning/Neural_Networks");
  EXPECT_EQ(g.feature_dim, 128);
  EXPECT_EQ(g.nodes[0].title, "abilities accuracy addresses ai approach available based case");
  for (const auto& v : g.nodes) {
    EXPECT_EQ(v.text.compare(0, v.title.size(), v.title), 0);
    EXPECT_LE(std::count(v.title.begin(), v.title.end(), ' '), gt::kCoraTitleWords - 1);
  }
  for (InstructionTask t : kTasks) {
    auto o = opts(t, SplitPart::kTest);
    auto recs = gt::build_instructions(g, o);
    size_t yes = 0;
    for (const auto& r : recs) yes += r.label == 1;
    std::printf("[stats] cora %s test: %zu records%s\n", gt::instruction_task_name(t), recs.size(),
                t == InstructionTask::kLinkPrediction ? (", " + std::to_string(yes) + " yes").c_str() : "");
    EXPECT_FALSE(recs.empty());
    EXPECT_EQ(recs[0].id.compare(0, 10, "cora_test_"), 0);
  }
}

TEST(CoraMl, DamagedFilesNameFileAndLine) {
  gt::test::TempDir tmp("gt_cora");
  const std::string classes = "0\tA/One\n1\tA/Two\n";
  const std::string nodes = "idx\tpaper_id\tlabel\tlabel_name\tkeywords\n0\t11\t0\tOne\talpha beta\n1\t12\t1\tTwo\tgamma\n";
  auto make = [&](const std::string& c, const std::string& n, const std::string& e) {
    tmp.write("classes.txt", c);
    tmp.write("nodes.tsv", n);
    tmp.write("edges.tsv", e);
    return gt::test::input_error_of([&] { gt::load_cora_ml(tmp.path); });
  };
  EXPECT_EQ(make(classes, nodes, "src\tdst\n0\t1\n"), "(no error)");
  const gt::TextGraph g = gt::load_graph(tmp.path);
  EXPECT_EQ(g.nodes[0].title, "alpha beta");
  EXPECT_EQ(g.class_names[1], "Two");
  std::string e = make(classes, nodes, "src\tdst\n0\t1\n0\t7\n");
  EXPECT_NE(e.find("edges.tsv: line 3"), std::string::npos) << e;
  e = make(classes, nodes, "src\tdst\n0\t1\n0\t1\n");
  EXPECT_NE(e.find("edges.tsv: line 3: duplicate"), std::string::npos) << e;
  e = make(classes, nodes + "2\t13\t5\tOne\tx\n", "src\tdst\n");
  EXPECT_NE(e.find("nodes.tsv: line 4"), std::string::npos) << e;
  e = make(classes, nodes + "2\t13\t0\tTwo\tx\n", "src\tdst\n");
  EXPECT_NE(e.find("label_name"), std::string::npos) << e;
  e = make(classes, "idx\tlabel\n", "src\tdst\n");
  EXPECT_NE(e.find("nodes.tsv: line 1: header"), std::string::npos) << e;
  e = make("0\tA/One\n3\tA/Two\n", nodes, "src\tdst\n");
  EXPECT_NE(e.find("classes.txt: line 2"), std::string::npos) << e;
  for (const std::string& m : {e}) EXPECT_EQ(m.find('\n'), std::string::npos);
}

}  // namespace
