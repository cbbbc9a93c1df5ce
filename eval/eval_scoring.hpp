#pragma once
// Scoring an evaluation's answers against the records' own gpt answers, dataset by dataset (the
// id's prefix: GraphGPT's eval sets mix arXiv, PubMed and Cora), and writing its result files:
//   * link prediction (id ending in "_LP"): the reference answer's yes/no is the label;
//     link_metrics (accuracy, AUC).
//   * node classification (one graph, the reference answer names a class of the dataset's list:
//     [eval].classes, else [data].graph's when the features come from it): classification_metrics
//     (accuracy, macro-F1, unparsed, confusion, and GraphGPT's top-3 containment).
//   * every other one-graph record (graph matching, or a dataset without a class list):
//     exact_match, the share of answers equal to the reference (both stripped of whitespace).
// The files: OUT/predictions.jsonl (GraphGPT's row shapes, in record order), OUT/metrics.json and
// OUT/graphgpt/<dataset>_test_res_0_<n>.json (GraphGPT's result files, which its metric script
// reads from a folder of nothing else), each staged and renamed into place once all are written.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/job_config.hpp"
#include "data/instructions.hpp"

namespace gt {

class Tokenizer;

enum class EvalTask { kNodeClassification, kLinkPrediction, kGraphMatching };

// Which task a record is and its label (class index, 1/0 for links, -1 otherwise).
struct EvalReference {
  EvalTask task = EvalTask::kGraphMatching;
  int32_t label = -1;
  std::string answer;  // the record's last gpt turn, stripped
};

// The class names each dataset's answers are scored against, and where they came from.
struct DatasetClasses {
  std::vector<std::string> names;
  std::string source;
};

// "FILE: record id \"ID\"": where an error about one record points.
std::string record_where(const std::string& file, const InstructionRecord& r);

// Datasets in order of first appearance.
std::vector<std::string> datasets_of(const std::vector<InstructionRecord>& records);

// [eval].classes, else [data].graph's classes for a single-graph dataset whose features come from
// it; a dataset with neither is scored by exact match (one line on stderr says so).
std::map<std::string, DatasetClasses> eval_class_lists(const JobConfig& cfg, const std::vector<InstructionRecord>& records);

// A node-classification record's label is the first class its reference answer names
// (parse_class): the answer itself for GraphGPT's std sets, the conclusion's class for its
// chain-of-thought sets, which name the class before discussing others. InputError naming the
// record for one that cannot be scored.
std::vector<EvalReference> eval_references(const std::vector<InstructionRecord>& records,
                                           const std::map<std::string, DatasetClasses>& classes, const std::string& file);

// The answer budget when [eval].max_new_tokens is 0: the longest reference answer, half again
// (a model's wording varies), within [32, 1024]; `longest` gets that answer's tokens.
int64_t auto_max_new_tokens(const std::vector<EvalReference>& refs, const Tokenizer& tok, int64_t* longest);

struct EvalScores {
  std::string metrics_json;  // metrics.json's text
  double accuracy = 0;       // over every record
  std::string summary;       // " | synth: node classification: accuracy 0.8123, ..."
};

// What metrics.json records beside the scores: the run's inputs and settings.
struct EvalSetup {
  std::string projector_from, template_name;
  int64_t max_new_tokens = 0, answers_at_budget = 0;
};

// Scores `answers` (one per record, in record order) and writes the result files into out_dir.
EvalScores score_and_write_eval(const JobConfig& cfg, const std::vector<InstructionRecord>& records,
                                const std::vector<EvalReference>& refs,
                                const std::map<std::string, DatasetClasses>& classes,
                                const std::vector<std::string>& answers, const EvalSetup& setup,
                                const std::string& out_dir);

// The result files an eval writes into out_dir, by name (predictions.jsonl, metrics.json,
// graphgpt/): what a fresh eval removes first, so that a folder never holds a finished eval's
// results beside another one's progress.
std::vector<std::string> eval_result_files();

}  // namespace gt
