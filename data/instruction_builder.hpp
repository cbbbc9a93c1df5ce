#pragma once
// GraphGPT instruction records built from a TextGraph (`graphtune data build`). The records use
// GraphGPT's exact JSON schema (../shared/notes/graphgpt.md, "Data formats"):
//   {"id": "<dataset>_<split>_<node>",
//    "graph": {"node_idx": centre, "edge_index": [[src...], [dst...]], "node_list": [centre, ...]},
//    "conversations": [{"from": "human", "value": "...<graph>..."}, {"from": "gpt", "value": "..."}]}
// Link prediction: "graph" holds node_idx_1/edge_index_1/node_list_1 and the same with _2, the
// question has two <graph> markers and the id is "<dataset>_<split>_<node1>_<node2>_LP".
// node_idx and node_list are global node ids; edge_index holds positions into node_list.
//
// Tasks:
//   graph_matching       (stage 1) one record per centre: the subgraph's titles listed shuffled,
//                        the answer matches graph token k to node_list[k]'s title.
//   node_classification  (stage 2) one record per centre: title and text of the centre, the class
//                        names listed; the answer is class_names[label] exactly.
//   link_prediction      (stage 2) balanced "yes"/"no" pairs. Positives of a split are that
//                        split's edges of split_links(); negatives are non-edges of the whole
//                        graph whose pair_part() is the split.
// Record templates (--template): "graphgpt" samples GraphGPT's k-hop subgraph
// (sample_subgraph); "llaga" writes LLaGA's fixed-shape neighbour tree (sample_template_tree:
// 1 + fanout + ... + fanout^hops slots, a pad holding the centre's id and touched by no edge) in
// the same record format, for node_classification only so far; "hop_field" writes LLaGA's
// hop-field overview's graph, the centre once a hop (hop_field_graph), whose features the
// hop_field encoder's table holds (loader/hop_field.hpp), node_classification only: that table
// propagates over every citation of the graph, which link prediction holds out. The question's
// text (the centre's title and text) is the same for all three.
// Leakage rules:
//   * Centres of graph_matching / node_classification come from split_nodes(train_frac,
//     val_frac, split_seed): a test centre is never a training centre, whatever the task or --seed.
//   * Every subgraph of every task and split is sampled from sampling_graph(): the val and test
//     edges of split_links(edge_val_frac, edge_test_frac, split_seed) are not in it. A training
//     positive (u, v) is additionally removed while sampling its own two subgraphs, so a training
//     positive looks like a test positive (never visible in its own subgraphs).
//   * Link prediction is transductive in nodes (as GraphGPT): an endpoint may appear in pairs of
//     several splits; the links themselves never cross splits.
// Determinism: everything derives from `seed` (sampling, shuffles, negatives, record subset) and
// `split_seed` (node and edge splits) through gt::Rng; the same options give identical bytes.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/graph_sampling.hpp"
#include "data/instructions.hpp"
#include "data/link_split.hpp"
#include "data/text_graph.hpp"

namespace gt {

enum class InstructionTask : uint8_t { kGraphMatching, kNodeClassification, kLinkPrediction };

// "graph_matching", "node_classification", "link_prediction"; an unknown name is an InputError
// naming --task.
InstructionTask parse_instruction_task(const std::string& name);
const char* instruction_task_name(InstructionTask t);
// "train", "val", "test"; anything else is an InputError naming --split.
SplitPart parse_split_part(const std::string& name);
const char* split_part_name(SplitPart p);

struct InstructionBuildOptions {
  InstructionTask task = InstructionTask::kGraphMatching;
  SplitPart split = SplitPart::kTrain;
  int32_t hops = kGraphGptHops;      // --hops
  int32_t fanout = kGraphGptFanout;  // --fanout
  int32_t max_nodes = 0;             // --max-nodes: keep the first N of node_list (0: all, GraphGPT)
  std::string record_template = "graphgpt";  // --template: "graphgpt", "llaga" or "hop_field"
  uint64_t seed = 42;                // --seed: sampling, shuffles, negatives, record subset
  uint64_t split_seed = 42;          // --split-seed: node split and held-out edges
  double train_frac = 0.6, val_frac = 0.2;             // --train-frac, --val-frac (node split)
  double edge_val_frac = 0.05, edge_test_frac = 0.10;  // --edge-val-frac, --edge-test-frac
  int64_t max_records = 0;           // --max-records (0: all); link prediction keeps it balanced
};

// InputError naming the flag of the first bad value; the llaga template's refusals (another task,
// --max-nodes, --hops 0, a tree past kMaxTemplateSlots) and the hop field's (another task,
// --max-nodes, --hops outside [1, kMaxFieldHops]) are here too, before any graph is read.
void validate(const InstructionBuildOptions& o);

// A GraphGPT record (data/instructions.hpp) plus what the builder knows of its answer.
struct BuiltInstruction : InstructionRecord {
  int32_t label = -1;  // not written: class (node_classification), 1 yes / 0 no (link_prediction)
};

// The fixed texts (GraphGPT's wording).
extern const char* const kGraphMatchingQuestionHead;  // up to "Here is a list of paper titles: "
extern const char* const kGraphMatchingQuestionTail;  // from ", please reorder ..."
extern const char* const kGraphMatchingAnswerHead;    // "Based on ... as follows: "
extern const char* const kLinkPredictionQuestion;     // with two <graph> markers

// Validates, splits, samples and writes the texts. The records of graph_matching and
// node_classification are in ascending centre order; link prediction's are shuffled by seed.
// An empty result (no centre or no edge in the split) is an InputError naming --split.
std::vector<BuiltInstruction> build_instructions(const TextGraph& g, const InstructionBuildOptions& o);

// The records alone, for data/instructions.hpp's writer (validated there; one record per line,
// GraphGPT's keys in schema order).
std::vector<InstructionRecord> records_of(const std::vector<BuiltInstruction>& built);

}  // namespace gt
