#include "eval/eval_scoring.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/text.hpp"
#include "config/names.hpp"
#include "data/class_lists.hpp"
#include "data/cora_ml.hpp"
#include "data/metrics.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

std::string record_where(const std::string& file, const InstructionRecord& r) {
  return file + ": record id " + nlohmann::json(r.id).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

nlohmann::ordered_json parsed(const std::string& json_text) { return nlohmann::ordered_json::parse(json_text); }

}  // namespace

std::vector<std::string> datasets_of(const std::vector<InstructionRecord>& records) {
  std::vector<std::string> out;
  for (const auto& r : records)
    if (std::find(out.begin(), out.end(), r.dataset) == out.end()) out.push_back(r.dataset);
  return out;
}

std::map<std::string, DatasetClasses> eval_class_lists(const JobConfig& cfg, const std::vector<InstructionRecord>& records) {
  std::map<std::string, DatasetClasses> out;
  if (!cfg.eval.classes.empty())
    for (auto& [d, names] : read_class_lists(cfg.eval.classes)) out[d] = {names, cfg.eval.classes};
  // The text graph the features come from knows its classes; a feature file does not.
  std::vector<std::string> graph_classes;
  bool graph_loaded = false;
  for (const auto& d : datasets_of(records)) {
    if (out.count(d)) continue;
    const bool single_graph = std::any_of(records.begin(), records.end(), [&](const InstructionRecord& r) {
      return r.dataset == d && !is_link_prediction_id(r.id);
    });
    if (!single_graph) continue;
    if (cfg.data.features.empty()) {
      if (!graph_loaded) graph_classes = load_graph(cfg.data.graph).class_names;
      graph_loaded = true;
      out[d] = {graph_classes, cfg.data.graph};
    } else {
      std::fprintf(stderr,
                   "graphtune: eval: no class list for dataset '%s' (its records are scored by exact match): name one "
                   "in [eval].classes\n",
                   d.c_str());
    }
  }
  return out;
}

std::vector<EvalReference> eval_references(const std::vector<InstructionRecord>& records,
                                           const std::map<std::string, DatasetClasses>& classes, const std::string& file) {
  std::vector<EvalReference> refs;
  for (const auto& r : records) {
    if (r.conversations.empty() || r.conversations.back().from != "gpt")
      fail(record_where(file, r), "conversations: the last turn must be the gpt answer to score against");
    EvalReference ref;
    ref.answer = trim_whitespace(r.conversations.back().value);
    if (is_link_prediction_id(r.id)) {
      ref.task = EvalTask::kLinkPrediction;
      ref.label = parse_yes_no(ref.answer);
      if (ref.label < 0)
        fail(record_where(file, r), "a link-prediction answer must be \"yes\" or \"no\", got \"" + ref.answer + "\"");
    } else if (auto it = classes.find(r.dataset); it != classes.end()) {
      ref.label = parse_class(ref.answer, it->second.names);
      if (ref.label >= 0) ref.task = EvalTask::kNodeClassification;
    }
    refs.push_back(ref);
  }
  return refs;
}

int64_t auto_max_new_tokens(const std::vector<EvalReference>& refs, const Tokenizer& tok, int64_t* longest) {
  *longest = 0;
  for (const auto& r : refs)
    *longest = std::max<int64_t>(*longest, static_cast<int64_t>(tok.encode(r.answer, false, false).size()));
  return std::clamp<int64_t>((*longest * 3 + 1) / 2, 32, 1024);
}

std::vector<std::string> eval_result_files() { return {"predictions.jsonl", "metrics.json", "graphgpt"}; }

EvalScores score_and_write_eval(const JobConfig& cfg, const std::vector<InstructionRecord>& records,
                                const std::vector<EvalReference>& refs,
                                const std::map<std::string, DatasetClasses>& classes,
                                const std::vector<std::string>& answers, const EvalSetup& setup,
                                const std::string& out_dir) {
  std::vector<PredictionRecord> preds;
  for (size_t i = 0; i < records.size(); ++i) {
    const InstructionRecord& r = records[i];
    PredictionRecord p{r.id, r.graphs.front().node_idx, answers[i]};
    if (refs[i].task == EvalTask::kLinkPrediction) {
      p.link = true;
      p.node_idx_2 = r.graphs.back().node_idx;
      p.truth = r.conversations.back().value;
    }
    preds.push_back(p);
  }
  const std::vector<std::string> datasets = datasets_of(records);
  nlohmann::ordered_json by_dataset;
  int64_t correct = 0;
  EvalScores out;
  char buf[320];
  for (const std::string& d : datasets) {
    std::vector<std::string> nc_pred, lp_pred;
    std::vector<int32_t> nc_label, lp_label;
    int64_t gm_n = 0, gm_exact = 0, n = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].dataset != d) continue;
      ++n;
      const EvalReference& ref = refs[i];
      switch (ref.task) {
        case EvalTask::kNodeClassification: nc_pred.push_back(answers[i]); nc_label.push_back(ref.label); break;
        case EvalTask::kLinkPrediction: lp_pred.push_back(answers[i]); lp_label.push_back(ref.label); break;
        case EvalTask::kGraphMatching: ++gm_n; gm_exact += answers[i] == ref.answer ? 1 : 0; break;
      }
    }
    nlohmann::ordered_json j;
    j["n"] = n;
    out.summary += " | " + d + ":";
    correct += gm_exact;
    if (!nc_pred.empty()) {
      const DatasetClasses& dc = classes.at(d);
      ClassificationMetrics m = classification_metrics(nc_pred, nc_label, dc.names);
      correct += m.correct;
      j["node_classification"] = parsed(metrics_json(m, dc.names));
      j["node_classification"]["classes_from"] = dc.source;
      j["node_classification"]["chance"] = 1.0 / static_cast<double>(dc.names.size());  // uniform guessing
      // Always answering these papers' most common class: what a model that learned only the
      // label distribution scores, the bar a tuned model has to clear.
      std::vector<int64_t> per_class(dc.names.size(), 0);
      for (int32_t y : nc_label) ++per_class[static_cast<size_t>(y)];
      const double majority = static_cast<double>(*std::max_element(per_class.begin(), per_class.end())) /
                              static_cast<double>(nc_label.size());
      j["node_classification"]["majority"] = majority;
      std::snprintf(buf, sizeof(buf),
                    " node classification: accuracy %.4f, macro-F1 %.4f, top-3 containment (GraphGPT's \"accuracy\") "
                    "%.4f, unparsed %lld, chance %.4f (%zu classes), majority %.4f, n %lld",
                    m.accuracy, m.macro_f1, m.top3_containment, static_cast<long long>(m.unparsed),
                    1.0 / static_cast<double>(dc.names.size()), dc.names.size(), majority, static_cast<long long>(m.n));
      out.summary += buf;
    }
    if (!lp_pred.empty()) {
      LinkMetrics m = link_metrics(lp_pred, lp_label);
      correct += std::llround(m.accuracy * static_cast<double>(m.n));
      j["link_prediction"] = parsed(metrics_json(m));
      std::snprintf(buf, sizeof(buf), " link prediction: accuracy %.4f, AUC %.4f, unparsed %lld, chance 0.5, n %lld",
                    m.accuracy, m.auc, static_cast<long long>(m.unparsed), static_cast<long long>(m.n));
      out.summary += buf;
    }
    if (gm_n > 0) {
      nlohmann::ordered_json g;
      g["task"] = "graph_matching";
      g["n"] = gm_n;
      g["exact_match"] = static_cast<double>(gm_exact) / static_cast<double>(gm_n);
      j["graph_matching"] = g;
      std::snprintf(buf, sizeof(buf), " exact match %.4f, n %lld", g["exact_match"].get<double>(),
                    static_cast<long long>(gm_n));
      out.summary += buf;
    }
    by_dataset[d] = j;
  }
  nlohmann::ordered_json top;
  const int64_t n = static_cast<int64_t>(records.size());
  out.accuracy = n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
  top["n"] = n;
  top["correct"] = correct;
  top["accuracy"] = out.accuracy;  // over every record
  top["instructions"] = cfg.data.instructions;
  top["model"] = cfg.model.path;
  top["projector"] = setup.projector_from;
  top["adapter"] = cfg.model.adapter;
  top["protocol"] = name_of(cfg.eval.protocol);
  top["template"] = setup.template_name;
  top["temperature"] = cfg.eval.temperature;
  top["top_p"] = cfg.eval.top_p;
  top["seed"] = cfg.eval.seed;
  top["max_new_tokens"] = setup.max_new_tokens;
  top["answers_at_max_new_tokens"] = setup.answers_at_budget;
  top["text_only"] = cfg.eval.text_only;
  top["answers"] = cfg.eval.answers;
  // One dataset: its blocks at the top as well, where a single-graph run has always had them.
  if (datasets.size() == 1)
    for (auto& [k, v] : by_dataset[datasets.front()].items())
      if (k != "n") top[k] = v;
  top["datasets"] = by_dataset;
  out.metrics_json = top.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";

  // Every file staged beside its target, then renamed into place.
  make_dirs(out_dir);
  std::vector<std::unique_ptr<AtomicFile>> files;
  auto stage = [&](const std::string& path, const std::string& text) {
    files.push_back(std::make_unique<AtomicFile>(path));
    files.back()->write(text);
  };
  stage(out_dir + "/predictions.jsonl", predictions_jsonl(preds));
  stage(out_dir + "/metrics.json", out.metrics_json);
  const std::string res_dir = out_dir + "/graphgpt";
  make_dirs(res_dir);
  for (const std::string& d : datasets) {
    std::vector<PredictionRecord> rows;
    for (const auto& p : preds)
      if (dataset_of_id(p.id) == d) rows.push_back(p);
    stage(res_dir + "/" + d + "_test_res_0_" + std::to_string(rows.size()) + ".json", graphgpt_results_json(rows));
  }
  for (auto& f : files) f->commit();
  return out;
}

}  // namespace gt
