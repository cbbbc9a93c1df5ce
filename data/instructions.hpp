#pragma once
// GraphGPT instruction records: the JSON list the reference's LazySupervisedDataset reads
// (docs/graphgpt-data.md). Reading validates every record before returning; writing uses
// the reference's key names and layout so that GraphGPT can read graphtune's files. No libtorch.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// One sampled subgraph. node_list holds global node ids (rows of the dataset's feature table),
// the centre first; edge_index holds local positions into node_list (row 0 sources, row 1
// destinations, equally long); node_idx is the centre's global id, so node_list[0] == node_idx.
struct GraphRef {
  int64_t node_idx = 0;
  std::vector<int64_t> node_list;
  std::array<std::vector<int64_t>, 2> edge_index;
};

struct Turn {
  std::string from;  // "human" | "gpt"
  std::string value;
};

struct InstructionRecord {
  std::string id;       // "<dataset>_<split>_<node>", link prediction ends in "_LP"
  std::string dataset;  // the id's prefix before the first '_' (the whole id when there is none)
  std::vector<GraphRef> graphs;  // 1, or 2 for "_LP" records (keys ..._1 and ..._2)
  std::vector<Turn> conversations;
};

struct InstructionReadOptions {
  // Drop records that fail validation (and later duplicates of an id) instead of failing;
  // file-level problems (unreadable, empty, not JSON, not a list, no valid record) still fail.
  bool skip_invalid = false;
  size_t max_reasons = 5;  // how many skip reasons the report keeps
};

struct InstructionReadReport {
  int64_t total = 0;    // records in the file
  int64_t skipped = 0;  // records dropped (skip_invalid only)
  std::vector<std::string> first_reasons;  // one-line reasons of the first skipped records
};

// Reads and validates a GraphGPT instruction file. Every problem is an InputError, one line
// naming the file, the record (index and id) and the field, e.g.
//   "s2.json: record 3 (id \"arxiv_train_7\"): graph.edge_index[1][4]: 9 is outside node_list (5 nodes)"
std::vector<InstructionRecord> read_instructions(const std::string& path,
                                                 const InstructionReadOptions& options = {},
                                                 InstructionReadReport* report = nullptr);
// The same from the file's text; `path` names it in errors (tests/fuzz/instructions_fuzz.cpp).
std::vector<InstructionRecord> read_instructions_text(const std::string& text, const std::string& path,
                                                      const InstructionReadOptions& options = {},
                                                      InstructionReadReport* report = nullptr);

// Writes records atomically in GraphGPT's layout: a JSON list, one record per line, keys in the
// reference's order (id, graph, conversations; node_idx, edge_index, node_list). Records are
// validated first, with the same messages as read_instructions (naming path).
void write_instructions(const std::string& path, const std::vector<InstructionRecord>& records);
// What write_instructions writes, after the same validation; `path` names the records in errors.
std::string instructions_json(const std::vector<InstructionRecord>& records, const std::string& path);

// The checks read_instructions runs on each record (not the duplicate-id check); an InputError
// "where: record <index> (id "..."): <field>: <problem>", or "where: record id "...": ..." when
// index is left out.
void validate_instruction(const InstructionRecord& record, const std::string& where,
                          size_t index = static_cast<size_t>(-1));

// Every global node id of the record's graphs must be a row of the feature table
// (0 <= id < num_nodes); an InputError naming where, the record id and the field otherwise.
void check_node_ids(const InstructionRecord& record, int64_t num_nodes, const std::string& where);

// The id's prefix before the first '_' (as the reference's id.split('_')[0]).
std::string dataset_of_id(const std::string& id);
// Whether the reference treats the record as link prediction: id.split('_')[-1] == "LP".
bool is_link_prediction_id(const std::string& id);

// The same question without its graphs, for answering from the text alone (the text-only
// baseline, and the instruction documents an LLM warms up on): every "<graph>" marker is
// removed together with one line break right after it, and graphs is emptied.
// validate_instruction accepts such a record (no graph, no marker); GraphGPT's JSON cannot hold
// one (its "graph" key is required), so it lives in memory only.
InstructionRecord text_only_record(const InstructionRecord& record);

// GraphGPT's marker for a graph in a human turn, and the reserved texts no turn may contain
// (the template's separator and the tokens a marker expands to).
inline constexpr const char* kGraphMarker = "<graph>";
const std::vector<std::string>& reserved_turn_texts();

}  // namespace gt
