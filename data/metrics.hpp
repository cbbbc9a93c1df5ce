#pragma once
// Evaluation metrics for GraphGPT-style answers: node classification (accuracy, macro-F1,
// confusion, and GraphGPT's own "accuracy", which is top-3 containment) and link prediction
// (accuracy, AUC), plus the files an evaluation writes: metrics.json and a JSONL of
// predictions in GraphGPT's output shape {id, node_idx, res}. No libtorch.
//
// Reading a class out of an answer (parse_class):
//   1. Normalised exact match: lower-case (ASCII), drop a trailing "</s>", strip whitespace and
//      punctuation at both ends, collapse internal whitespace. The answer "  Neural_Networks.</s>"
//      and the class "neural_networks" match.
//   2. Otherwise the FIRST class name mentioned in the (lower-cased, whitespace-collapsed) text.
//      A mention is a substring equal to a normalised class name that is not glued to a letter or
//      digit on either side ("ai" is not found in "said"). A mention lying inside a longer
//      mention of another class is dropped (classes "learning" and "machine learning": the text
//      "machine learning" names only the latter), so the longest match wins on overlap; of the
//      remaining mentions the earliest wins.
//   3. Otherwise no class: the prediction is wrong, counted in `unparsed` and in the confusion
//      column "none".
//
// GraphGPT's reported node-classification "accuracy" is top-3 containment: the true label is
// among the first three distinct class names regex-found in the answer (in order of first
// appearance). It is reported here separately, as top3_containment; `accuracy` is the plain
// first-class accuracy.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

struct ClassificationMetrics {
  int64_t n = 0;
  int64_t correct = 0;
  int64_t unparsed = 0;  // predictions naming no known class
  double accuracy = 0.0;
  // Macro-F1 over the classes that occur as a true label or as a prediction (see
  // classification_metrics).
  double macro_f1 = 0.0;
  // [true][pred], classes.size() + 1 columns: the last (index classes.size()) is "none".
  std::vector<std::vector<int64_t>> confusion;
  double top3_containment = 0.0;  // GraphGPT's "accuracy"
};

// The normalisation above (lower-case, trailing "</s>" dropped, ends stripped, whitespace
// collapsed).
std::string normalise_answer(const std::string& text);

// Distinct classes mentioned in the text, in order of first appearance (rule 2 above); when the
// whole answer is exactly a class name (rule 1), that class comes first.
std::vector<int32_t> mentioned_classes(const std::string& prediction, const std::vector<std::string>& class_names);

// The class the prediction names (rules 1-2), or -1 when it names none.
int32_t parse_class(const std::string& prediction, const std::vector<std::string>& class_names);

// predictions[i] is the answer for a node whose true class is labels[i] (an index into
// class_names). InputError when the lengths differ, a label is outside the classes, or the
// class names are empty or collide after normalisation.
//
// macro-F1: F1_c = 2 TP / (2 TP + FP + FN) per class, averaged over the classes that have
// support or were predicted; a class with neither is left out (its F1 would be 0/0). This is
// sklearn's f1_score(y_true, y_pred, average="macro") with labels left to the default (the
// union of y_true and y_pred), except that an unparsed prediction is not a label of its own:
// sklearn, given a "none" label, would average in a class "none" with F1 = 0 and so punish
// unparsed answers twice; here an unparsed answer is a false negative of its true class only,
// i.e. f1_score(..., labels=sorted(set(y_true) | set(y_pred) - {"none"}), average="macro").
ClassificationMetrics classification_metrics(const std::vector<std::string>& predictions,
                                             const std::vector<int32_t>& labels,
                                             const std::vector<std::string>& class_names);

struct LinkMetrics {
  int64_t n = 0;
  int64_t unparsed = 0;  // answers starting with neither "yes" nor "no"
  double accuracy = 0.0;
  // ROC AUC of the scores yes = 1, no = 0 (unparsed = 0.5) against the labels, ties counted
  // half (Mann-Whitney U / (P N)); NaN when the labels hold only one class.
  double auc = 0.0;
};

// 1 for "yes", 0 for "no", -1 for neither: the first word of the answer (leading whitespace and
// punctuation skipped, case-insensitive), which must not run on into more letters ("Yesterday"
// is neither). GraphGPT maps its answers' yes/no to 1/0 the same way before computing AUC.
int parse_yes_no(const std::string& answer);

// labels: 1 = the edge exists, 0 = it does not. An unparsed answer is wrong for accuracy and
// scores 0.5 (no preference) for AUC. InputError when the lengths differ or a label is not 0/1.
LinkMetrics link_metrics(const std::vector<std::string>& answers, const std::vector<int32_t>& labels);

// Mann-Whitney ROC AUC with ties counted half; NaN without both classes.
double roc_auc(const std::vector<double>& scores, const std::vector<int32_t>& labels);

// metrics.json contents (pretty-printed JSON object, newline-terminated). NaN is written as null.
std::string metrics_json(const ClassificationMetrics& m, const std::vector<std::string>& class_names);
std::string metrics_json(const LinkMetrics& m);

// One generated answer, in GraphGPT's output shapes: {id, node_idx, res} (run_graphgpt.py), or
// for link prediction {id, node_idx_1, node_idx_2, truth, res} (run_graphgpt_LP.py; truth is the
// record's reference answer).
struct PredictionRecord {
  std::string id;
  int64_t node_idx = 0;
  std::string res;
  bool link = false;
  int64_t node_idx_2 = 0;  // link: node_idx is node_idx_1
  std::string truth;       // link only
};
std::string predictions_jsonl(const std::vector<PredictionRecord>& records);
// GraphGPT's result file ({output}/..._test_res_{start}_{end}.json): one JSON list of the same
// rows, indented by 4 as its json.dump(..., indent=4) writes it, newline-terminated.
std::string graphgpt_results_json(const std::vector<PredictionRecord>& records);
// Writes predictions_jsonl atomically (common/atomic_file.hpp).
void write_predictions_jsonl(const std::string& path, const std::vector<PredictionRecord>& records);

}  // namespace gt
