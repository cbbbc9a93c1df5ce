// graphtune eval --config FILE [--section.key VALUE ...] [--out DIR]: answers every instruction
// record with GraphGPT (the LLM, the graph encoder and a stage's projector, as build_graphgpt
// assembles them from the training config), batched with the graphs spliced in (shortest
// prompts first; greedy decoding answers a repeated prompt without a graph once), greedy or
// sampled ([eval].protocol, temperature), and scores the answers against the records' own gpt
// answers, dataset by dataset (the id's prefix: GraphGPT's eval sets mix arXiv, PubMed and Cora):
//   * link prediction (id ending in "_LP"): the reference answer's yes/no is the label;
//     link_metrics (accuracy, AUC).
//   * node classification (one graph, the reference answer names a class of the dataset's list:
//     [eval].classes, else [data].graph's when the features come from it): classification_metrics
//     (accuracy, macro-F1, unparsed, confusion, and GraphGPT's top-3 containment).
//   * every other one-graph record (graph matching, or a dataset without a class list):
//     exact_match, the share of answers equal to the reference (both stripped of whitespace).
// Writes OUT/predictions.jsonl (GraphGPT's row shapes, in record order), OUT/metrics.json and
// OUT/graphgpt/<dataset>_test_res_0_<n>.json (GraphGPT's result files, which its metric script
// reads from a folder of nothing else); OUT is [eval].out_dir (default [job].out_dir/eval) or
// --out. Every file is written only once every answer is in, each atomically; a failure leaves
// none behind.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/world.hpp"
#include "common/atomic_file.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/text.hpp"
#include "config/job_config.hpp"
#include "config/names.hpp"
#include "control/control_client.hpp"
#include "data/class_lists.hpp"
#include "data/cora_ml.hpp"
#include "data/instructions.hpp"
#include "data/metrics.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "loader/prompt_order.hpp"
#include "model/graph_generate.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "worker/commands.hpp"
#include "worker/device_choice.hpp"

namespace gt {

namespace {

enum class EvalTask { kNodeClassification, kLinkPrediction, kGraphMatching };

std::string record_where(const std::string& file, const InstructionRecord& r) {
  return file + ": record id " + nlohmann::json(r.id).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Which task each record is and its label (class index, 1/0 for links, -1 otherwise).
struct Reference {
  EvalTask task = EvalTask::kGraphMatching;
  int32_t label = -1;
  std::string answer;  // the record's last gpt turn, stripped
};

// The class names each dataset's answers are scored against, and where they came from.
struct DatasetClasses {
  std::vector<std::string> names;
  std::string source;
};

// A node-classification record's label is the first class its reference answer names
// (parse_class): the answer itself for GraphGPT's std sets, the conclusion's class for its
// chain-of-thought sets, which name the class before discussing others.
std::vector<Reference> references(const std::vector<InstructionRecord>& records,
                                  const std::map<std::string, DatasetClasses>& classes, const std::string& file) {
  std::vector<Reference> refs;
  for (const auto& r : records) {
    if (r.conversations.empty() || r.conversations.back().from != "gpt")
      fail(record_where(file, r), "conversations: the last turn must be the gpt answer to score against");
    Reference ref;
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

// Datasets in order of first appearance.
std::vector<std::string> datasets_of(const std::vector<InstructionRecord>& records) {
  std::vector<std::string> out;
  for (const auto& r : records)
    if (std::find(out.begin(), out.end(), r.dataset) == out.end()) out.push_back(r.dataset);
  return out;
}

std::map<std::string, DatasetClasses> class_lists(const JobConfig& cfg, const std::vector<std::string>& datasets,
                                                  const std::vector<InstructionRecord>& records) {
  std::map<std::string, DatasetClasses> out;
  if (!cfg.eval.classes.empty())
    for (auto& [d, names] : read_class_lists(cfg.eval.classes)) out[d] = {names, cfg.eval.classes};
  // The text graph the features come from knows its classes; a feature file does not.
  std::vector<std::string> graph_classes;
  bool graph_loaded = false;
  for (const auto& d : datasets) {
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

// The answer budget when [eval].max_new_tokens is 0: the longest reference answer, half again
// (a model's wording varies), within [32, 1024].
int64_t auto_max_new_tokens(const std::vector<Reference>& refs, const Tokenizer& tok, int64_t* longest) {
  *longest = 0;
  for (const auto& r : refs)
    *longest = std::max<int64_t>(*longest, static_cast<int64_t>(tok.encode(r.answer, false, false).size()));
  return std::clamp<int64_t>((*longest * 3 + 1) / 2, 32, 1024);
}

// A row's sampling seed: the record's id and [eval].seed, so that an answer is the same whatever
// batch it is generated in and whichever other records are in the file.
uint64_t row_seed(uint64_t seed, const std::string& id) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the id, then splitmix64's finaliser
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

nlohmann::ordered_json parsed(const std::string& json_text) { return nlohmann::ordered_json::parse(json_text); }

int run_eval(const std::string& config_path, const std::string& out_flag, const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  JobConfig cfg = read_job_config(config_path, overrides, ConfigUse::kEval);
  const c10::Device device = use_job_device(cfg);  // a device this host has, or one line saying why not
  const std::string out_dir = out_flag.empty() ? cfg.eval.out_dir : out_flag;
  if (out_dir.empty()) fail("--out", "must not be empty");

  int argc = 0;
  char** argv = nullptr;
  World world(&argc, &argv);
  control::connect(world.rank(), world.size());  // when the launcher started it
  control::report_device(describe_device(device));
  if (world.size() > 1)
    fail("mpirun", "not supported yet: eval on " + std::to_string(world.size()) + " ranks; run one rank");
  if (cfg.training.threads > 0) torch::set_num_threads(static_cast<int>(cfg.training.threads));

  auto t0 = std::chrono::steady_clock::now();
  // Records, class lists and references before any weight is read: a bad record costs nothing.
  std::vector<InstructionRecord> records = read_job_records(cfg.data);
  const std::map<std::string, DatasetClasses> classes = class_lists(cfg, datasets_of(records), records);
  std::vector<Reference> refs = references(records, classes, cfg.data.instructions);

  GraphGptSetup s = build_graphgpt(cfg, device);
  const size_t before = records.size();
  check_records_against_features(records, s.features, cfg.data);
  if (records.size() != before) refs = references(records, classes, cfg.data.instructions);
  if (s.projector_from.empty())
    std::fprintf(stderr, "graphtune: eval: no [model].projector: the projector is fresh (untrained)\n");
  if (const std::string note = graphgpt_keys_note(s.model->llm->config(), cfg.model.path); !note.empty())
    std::fprintf(stderr, "graphtune: %s\n", note.c_str());
  // Every prompt before the first answer: a bad record (node id, length) fails fast.
  const ChatTemplate tmpl = chat_template_named(cfg.eval.chat_template, cfg.where("eval", "template"));
  const int32_t stop_id = chat_stop_id(tmpl, *s.tokenizer);  // where each answer ends
  std::vector<GraphExample> examples;
  examples.reserve(records.size());
  for (const auto& r : records)
    examples.push_back(make_prompt_example(cfg.eval.text_only ? text_only_record(r) : r, s.features, *s.tokenizer,
                                           cfg.data.max_len, cfg.data.instructions, tmpl));
  if (cfg.eval.text_only)
    std::fprintf(stderr, "graphtune: eval: text only: the <graph> markers are dropped, no graph token is spliced\n");
  int64_t longest_reference = 0;
  const int64_t max_new_tokens = cfg.eval.max_new_tokens > 0
                                     ? cfg.eval.max_new_tokens
                                     : auto_max_new_tokens(refs, *s.tokenizer, &longest_reference);
  const std::string decoding = cfg.eval.temperature > 0
                                   ? "sampling at temperature " + std::to_string(cfg.eval.temperature)
                                   : std::string("greedy");
  const std::string budget_why =
      cfg.eval.max_new_tokens > 0 ? ""
                                  : " (the longest reference answer is " + std::to_string(longest_reference) + " tokens)";
  std::fprintf(stderr, "graphtune: eval: protocol %s, template %s, %s, up to %lld new tokens%s\n",
               name_of(cfg.eval.protocol), chat_template_name(tmpl), decoding.c_str(),
               static_cast<long long>(max_new_tokens), budget_why.c_str());

  GraphGpt& model = s.model;
  model->eval();
  // Shortest prompts first, each repeat answered once where decoding is greedy (order_prompts);
  // the answers go back to file order below.
  const PromptOrder order = order_prompts(examples, cfg.eval.temperature <= 0);
  if (order.run.size() < examples.size())
    std::fprintf(stderr, "graphtune: eval: %zu distinct prompts of %zu records (greedy: a repeat gets the same answer)\n",
                 order.run.size(), examples.size());
  std::vector<std::vector<int32_t>> generated;  // in order.run's order
  generated.reserve(order.run.size());
  const size_t bs = static_cast<size_t>(cfg.eval.batch_size);
  const size_t batches = (order.run.size() + bs - 1) / bs;
  for (size_t b = 0; b < batches; ++b) {
    const size_t first = b * bs, last = std::min(order.run.size(), (b + 1) * bs);
    std::vector<GraphExample> chunk;
    for (size_t k = first; k < last; ++k) chunk.push_back(examples[order.run[k]]);
    GraphGptBatch batch = collate(chunk, s.tokenizer->pad_id());
    AnswerSampling sampling;
    sampling.temperature = static_cast<float>(cfg.eval.temperature);
    sampling.top_p = static_cast<float>(cfg.eval.top_p);
    if (sampling.temperature > 0)
      for (size_t k = first; k < last; ++k) sampling.row_seeds.push_back(row_seed(cfg.eval.seed, records[order.run[k]].id));
    {
      // bf16: the LLM and encoder are stored in bf16 (build_graphgpt), matmuls run in bf16.
      AutocastScope autocast(cfg.model.bf16(), model->projector->weight().device().type());
      for (auto& a : generate_graph_answers(model, model->prepare(batch, device), max_new_tokens, stop_id, sampling))
        generated.push_back(std::move(a));
    }
    std::fprintf(stderr, "graphtune: eval: batch %zu/%zu, %zu answers\n", b + 1, batches, generated.size());
  }
  std::vector<std::string> answers;
  answers.reserve(records.size());
  int64_t at_budget = 0;  // answers cut by max_new_tokens rather than ended by the model
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<int32_t>& a = generated[order.answer_of[i]];
    at_budget += static_cast<int64_t>(a.size()) >= max_new_tokens ? 1 : 0;
    answers.push_back(trim_whitespace(s.tokenizer->decode(a)));
  }
  if (at_budget > 0)
    std::fprintf(stderr, "graphtune: eval: %lld answers reached max_new_tokens (%lld) and were cut there\n",
                 static_cast<long long>(at_budget), static_cast<long long>(max_new_tokens));

  // Scores, dataset by dataset.
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
  std::string summary;
  char buf[320];
  for (const std::string& d : datasets) {
    std::vector<std::string> nc_pred, lp_pred;
    std::vector<int32_t> nc_label, lp_label;
    int64_t gm_n = 0, gm_exact = 0, n = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].dataset != d) continue;
      ++n;
      const Reference& ref = refs[i];
      switch (ref.task) {
        case EvalTask::kNodeClassification: nc_pred.push_back(answers[i]); nc_label.push_back(ref.label); break;
        case EvalTask::kLinkPrediction: lp_pred.push_back(answers[i]); lp_label.push_back(ref.label); break;
        case EvalTask::kGraphMatching: ++gm_n; gm_exact += answers[i] == ref.answer ? 1 : 0; break;
      }
    }
    nlohmann::ordered_json j;
    j["n"] = n;
    summary += " | " + d + ":";
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
      summary += buf;
    }
    if (!lp_pred.empty()) {
      LinkMetrics m = link_metrics(lp_pred, lp_label);
      correct += std::llround(m.accuracy * static_cast<double>(m.n));
      j["link_prediction"] = parsed(metrics_json(m));
      std::snprintf(buf, sizeof(buf), " link prediction: accuracy %.4f, AUC %.4f, unparsed %lld, chance 0.5, n %lld",
                    m.accuracy, m.auc, static_cast<long long>(m.unparsed), static_cast<long long>(m.n));
      summary += buf;
    }
    if (gm_n > 0) {
      nlohmann::ordered_json g;
      g["task"] = "graph_matching";
      g["n"] = gm_n;
      g["exact_match"] = static_cast<double>(gm_exact) / static_cast<double>(gm_n);
      j["graph_matching"] = g;
      std::snprintf(buf, sizeof(buf), " exact match %.4f, n %lld", g["exact_match"].get<double>(),
                    static_cast<long long>(gm_n));
      summary += buf;
    }
    by_dataset[d] = j;
  }
  nlohmann::ordered_json top;
  const int64_t n = static_cast<int64_t>(records.size());
  top["n"] = n;
  top["correct"] = correct;
  top["accuracy"] = n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;  // over every record
  top["instructions"] = cfg.data.instructions;
  top["model"] = cfg.model.path;
  top["projector"] = s.projector_from;
  top["adapter"] = cfg.model.adapter;
  top["protocol"] = name_of(cfg.eval.protocol);
  top["template"] = chat_template_name(tmpl);
  top["temperature"] = cfg.eval.temperature;
  top["top_p"] = cfg.eval.top_p;
  top["seed"] = cfg.eval.seed;
  top["max_new_tokens"] = max_new_tokens;
  top["answers_at_max_new_tokens"] = at_budget;
  top["text_only"] = cfg.eval.text_only;
  // One dataset: its blocks at the top as well, where a single-graph run has always had them.
  if (datasets.size() == 1)
    for (auto& [k, v] : by_dataset[datasets.front()].items())
      if (k != "n") top[k] = v;
  top["datasets"] = by_dataset;
  const std::string metrics_text = top.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";

  // Every file staged beside its target, then renamed into place.
  make_dirs(out_dir);
  std::vector<std::unique_ptr<AtomicFile>> files;
  auto stage = [&](const std::string& path, const std::string& text) {
    files.push_back(std::make_unique<AtomicFile>(path));
    files.back()->write(text);
  };
  stage(out_dir + "/predictions.jsonl", predictions_jsonl(preds));
  stage(out_dir + "/metrics.json", metrics_text);
  const std::string res_dir = out_dir + "/graphgpt";
  make_dirs(res_dir);
  for (const std::string& d : datasets) {
    std::vector<PredictionRecord> rows;
    for (const auto& p : preds)
      if (dataset_of_id(p.id) == d) rows.push_back(p);
    stage(res_dir + "/" + d + "_test_res_0_" + std::to_string(rows.size()) + ".json", graphgpt_results_json(rows));
  }
  for (auto& f : files) f->commit();

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: eval: n %lld, accuracy %.4f%s; %.1f s; wrote %s/predictions.jsonl, metrics.json and graphgpt/\n",
               static_cast<long long>(n), top["accuracy"].get<double>(), summary.c_str(), secs, out_dir.c_str());
  control::report_eval(metrics_text);
  control::report_done();
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto config = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto skip = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "eval", "answer instruction records with GraphGPT and score them (predictions.jsonl, metrics.json)");
  sub->add_option("--config", *config, "TOML job config (the training config; [eval] for batch_size, max_new_tokens, out_dir)");
  sub->add_option("--out", *out, "output folder (default [eval].out_dir, i.e. [job].out_dir/eval)");
  sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many (= --data.skip_invalid true)");
  sub->add_option("--device", *device, "auto | cpu | cuda (= --training.device)");
  sub->allow_extras();
  sub->callback([sub, config, out, skip, device, &exit_code] {
    auto extra = sub->remaining();
    if (!device->empty()) extra.insert(extra.end(), {"--training.device", *device});
    if (*skip) extra.insert(extra.end(), {"--data.skip_invalid", "true"});
    try {
      exit_code = run_eval(*config, *out, extra);
    } catch (const std::exception& e) {
      control::report_error(e.what());  // the launcher, if any, names it; the line is printed as usual
      throw;
    }
  });
}

}  // namespace gt
