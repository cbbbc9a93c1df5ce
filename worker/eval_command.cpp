// graphtune eval --config FILE [--section.key VALUE ...] [--out DIR]: answers every instruction
// record with GraphGPT (the LLM, the graph encoder and a stage's projector, as build_graphgpt
// assembles them from the training config), greedy and batched with the graphs spliced in, and
// scores the answers against the records' own gpt answers:
//   * link prediction (id ending in "_LP"): the reference answer's yes/no is the label;
//     link_metrics (accuracy, AUC).
//   * node classification (one graph, the reference answer is exactly a class name of
//     [data].graph after normalise_answer): classification_metrics (accuracy, macro-F1,
//     unparsed, confusion, top-3 containment).
//   * graph matching (every other one-graph record): exact_match, the share of answers equal
//     to the reference (both stripped of surrounding whitespace).
// Writes OUT/predictions.jsonl ({id, node_idx, res}, GraphGPT's output shape, in record order)
// and OUT/metrics.json; OUT is [eval].out_dir (default [job].out_dir/eval) or --out. Both files
// are written only once every answer is in, each atomically; a failure leaves neither behind.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/world.hpp"
#include "common/atomic_file.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "config/job_config.hpp"
#include "control/control_client.hpp"
#include "data/cora_ml.hpp"
#include "data/instructions.hpp"
#include "data/metrics.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "model/graph_generate.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "worker/commands.hpp"
#include "worker/device_choice.hpp"

namespace gt {

namespace {

enum class EvalTask { kNodeClassification, kLinkPrediction, kGraphMatching };

std::string strip(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string record_where(const std::string& file, const InstructionRecord& r) {
  return file + ": record id " + nlohmann::json(r.id).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Which task each record is and its label (class index, 1/0 for links, -1 for graph matching).
struct Reference {
  EvalTask task = EvalTask::kGraphMatching;
  int32_t label = -1;
  std::string answer;  // the record's last gpt turn, stripped
};

std::vector<Reference> references(const std::vector<InstructionRecord>& records, const std::vector<std::string>& classes,
                                  const std::string& file) {
  std::vector<std::string> normalised;
  for (const auto& c : classes) normalised.push_back(normalise_answer(c));
  std::vector<Reference> refs;
  for (const auto& r : records) {
    if (r.conversations.empty() || r.conversations.back().from != "gpt")
      fail(record_where(file, r), "conversations: the last turn must be the gpt answer to score against");
    Reference ref;
    ref.answer = strip(r.conversations.back().value);
    if (is_link_prediction_id(r.id)) {
      ref.task = EvalTask::kLinkPrediction;
      ref.label = parse_yes_no(ref.answer);
      if (ref.label < 0)
        fail(record_where(file, r), "a link-prediction answer must be \"yes\" or \"no\", got \"" + ref.answer + "\"");
    } else {
      const std::string a = normalise_answer(ref.answer);
      for (size_t k = 0; k < normalised.size(); ++k)
        if (normalised[k] == a) {
          ref.task = EvalTask::kNodeClassification;
          ref.label = static_cast<int32_t>(k);
          break;
        }
    }
    refs.push_back(ref);
  }
  return refs;
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
  // Records and their references before any weight is read: a bad record costs nothing.
  std::vector<InstructionRecord> records = read_job_records(cfg.data);
  bool any_single_graph = false;
  for (const auto& r : records) any_single_graph = any_single_graph || !is_link_prediction_id(r.id);
  std::vector<std::string> classes;
  if (any_single_graph) classes = load_graph(cfg.data.graph).class_names;
  std::vector<Reference> refs = references(records, classes, cfg.data.instructions);

  GraphGptSetup s = build_graphgpt(cfg, device);
  const size_t before = records.size();
  check_records_against_features(records, s.features, cfg.data);
  if (records.size() != before) refs = references(records, classes, cfg.data.instructions);
  if (cfg.model.projector.empty())
    std::fprintf(stderr, "graphtune: eval: no [model].projector: the projector is fresh (untrained)\n");
  if (const std::string note = graphgpt_keys_note(s.model->llm->config(), cfg.model.path); !note.empty())
    std::fprintf(stderr, "graphtune: %s\n", note.c_str());
  // Every prompt before the first answer: a bad record (node id, length) fails fast.
  const ChatTemplate tmpl = chat_template_named(cfg.data.chat_template, cfg.where("data", "template"));
  const int32_t stop_id = chat_stop_id(tmpl, *s.tokenizer);  // where each answer ends
  std::vector<GraphExample> examples;
  examples.reserve(records.size());
  for (const auto& r : records)
    examples.push_back(make_prompt_example(cfg.eval.text_only ? text_only_record(r) : r, s.features, *s.tokenizer,
                                           cfg.data.max_len, cfg.data.instructions, tmpl));
  if (cfg.eval.text_only)
    std::fprintf(stderr, "graphtune: eval: text only: the <graph> markers are dropped, no graph token is spliced\n");

  GraphGpt& model = s.model;
  model->eval();
  std::vector<std::string> answers;
  answers.reserve(records.size());
  const size_t bs = static_cast<size_t>(cfg.eval.batch_size);
  const size_t batches = (examples.size() + bs - 1) / bs;
  for (size_t b = 0; b < batches; ++b) {
    std::vector<GraphExample> chunk(examples.begin() + b * bs, examples.begin() + std::min(examples.size(), (b + 1) * bs));
    GraphGptBatch batch = collate(chunk, s.tokenizer->pad_id());
    std::vector<std::vector<int32_t>> ids;
    {
      // bf16: the LLM and encoder are stored in bf16 (build_graphgpt), matmuls run in bf16.
      AutocastScope autocast(cfg.model.bf16(), model->projector->weight().device().type());
      ids = generate_graph_answers(model, model->prepare(batch, device), cfg.eval.max_new_tokens, stop_id);
    }
    for (const auto& a : ids) answers.push_back(strip(s.tokenizer->decode(a)));
    std::fprintf(stderr, "graphtune: eval: batch %zu/%zu, %zu answers\n", b + 1, batches, answers.size());
  }

  // Scores, per task.
  std::vector<std::string> nc_pred, lp_pred;
  std::vector<int32_t> nc_label, lp_label;
  int64_t gm_n = 0, gm_exact = 0;
  std::vector<PredictionRecord> preds;
  for (size_t i = 0; i < records.size(); ++i) {
    const Reference& ref = refs[i];
    switch (ref.task) {
      case EvalTask::kNodeClassification: nc_pred.push_back(answers[i]); nc_label.push_back(ref.label); break;
      case EvalTask::kLinkPrediction: lp_pred.push_back(answers[i]); lp_label.push_back(ref.label); break;
      case EvalTask::kGraphMatching: ++gm_n; gm_exact += answers[i] == ref.answer ? 1 : 0; break;
    }
    preds.push_back({records[i].id, records[i].graphs.front().node_idx, answers[i]});
  }

  nlohmann::ordered_json j;
  const int64_t n = static_cast<int64_t>(records.size());
  int64_t correct = gm_exact;
  std::string summary;
  char buf[256];
  if (!nc_pred.empty()) {
    ClassificationMetrics m = classification_metrics(nc_pred, nc_label, classes);
    correct += m.correct;
    j["node_classification"] = parsed(metrics_json(m, classes));
    j["node_classification"]["chance"] = 1.0 / static_cast<double>(classes.size());  // uniform guessing
    // Always answering these papers' most common class: what a model that learned only the label
    // distribution scores, the bar a tuned model has to clear.
    std::vector<int64_t> per_class(classes.size(), 0);
    for (int32_t y : nc_label) ++per_class[static_cast<size_t>(y)];
    const double majority = static_cast<double>(*std::max_element(per_class.begin(), per_class.end())) /
                            static_cast<double>(nc_label.size());
    j["node_classification"]["majority"] = majority;
    std::snprintf(buf, sizeof(buf),
                  " | node classification: accuracy %.4f, macro-F1 %.4f, unparsed %lld, chance %.4f (%zu classes), "
                  "majority %.4f, n %lld",
                  m.accuracy, m.macro_f1, static_cast<long long>(m.unparsed), 1.0 / static_cast<double>(classes.size()),
                  classes.size(), majority, static_cast<long long>(m.n));
    summary += buf;
  }
  if (!lp_pred.empty()) {
    LinkMetrics m = link_metrics(lp_pred, lp_label);
    correct += std::llround(m.accuracy * static_cast<double>(m.n));
    j["link_prediction"] = parsed(metrics_json(m));
    std::snprintf(buf, sizeof(buf), " | link prediction: accuracy %.4f, AUC %.4f, unparsed %lld, chance 0.5, n %lld", m.accuracy,
                  m.auc, static_cast<long long>(m.unparsed), static_cast<long long>(m.n));
    summary += buf;
  }
  if (gm_n > 0) {
    nlohmann::ordered_json g;
    g["task"] = "graph_matching";
    g["n"] = gm_n;
    g["exact_match"] = static_cast<double>(gm_exact) / static_cast<double>(gm_n);
    j["graph_matching"] = g;
    std::snprintf(buf, sizeof(buf), " | graph matching: exact_match %.4f, n %lld", g["exact_match"].get<double>(),
                  static_cast<long long>(gm_n));
    summary += buf;
  }
  nlohmann::ordered_json top;
  top["n"] = n;
  top["correct"] = correct;
  top["accuracy"] = n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;  // over every record
  top["instructions"] = cfg.data.instructions;
  top["model"] = cfg.model.path;
  top["projector"] = cfg.model.projector;
  top["max_new_tokens"] = cfg.eval.max_new_tokens;
  top["text_only"] = cfg.eval.text_only;
  for (auto& [k, v] : j.items()) top[k] = v;
  const std::string metrics_text = top.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";

  // Both files staged beside their targets, then renamed into place.
  make_dirs(out_dir);
  AtomicFile pred_file(out_dir + "/predictions.jsonl"), metrics_file(out_dir + "/metrics.json");
  pred_file.write(predictions_jsonl(preds));
  metrics_file.write(metrics_text);
  pred_file.commit();
  metrics_file.commit();

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: eval: n %lld, accuracy %.4f%s; %.1f s; wrote %s/predictions.jsonl and metrics.json\n",
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
