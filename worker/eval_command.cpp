// graphtune eval --config FILE [--section.key VALUE ...] [--out DIR] [--resume | --overwrite]:
// answers every instruction record with GraphGPT (the LLM, the graph encoder and a stage's
// projector, as build_graphgpt assembles them from the training config), batched with the graphs
// spliced in, greedy or sampled ([eval].protocol, temperature), scores the answers against the
// records' own (eval/eval_scoring.hpp) and writes one set of result files.
//
// On one rank or many, in any layout training runs in: the prompts are cut into batches the same
// way whatever the layout (eval/eval_plan.hpp), the batches shared out over the replicas (dp x tp:
// tensor parallelism splits only the projector, so at eval its ranks answer batches of their own),
// and a replica of pp > 1 decodes its batches pipelined over its stages
// (eval/pipelined_decode.hpp). Every batch's answers are committed as soon as they are in
// (eval/eval_progress.hpp); once all are, world rank 0 scores them and writes the result files,
// the same, byte for byte, as one rank writes. A stopped or killed eval continues with --resume,
// at any layout.
#include <torch/torch.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/run_folder.hpp"
#include "comm/communicator.hpp"
#include "comm/world.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/text.hpp"
#include "config/job_config.hpp"
#include "config/names.hpp"
#include "control/control_client.hpp"
#include "eval/eval_choices.hpp"
#include "eval/eval_plan.hpp"
#include "eval/eval_progress.hpp"
#include "eval/eval_scoring.hpp"
#include "eval/pipelined_decode.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "loader/prompt_order.hpp"
#include "loader/shared_prefix.hpp"
#include "model/graph_generate.hpp"
#include "parallel/parallel_runtime.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "weights/load_model.hpp"
#include "worker/commands.hpp"
#include "worker/device_choice.hpp"
#include "worker/rank_errors.hpp"
#include "worker/template_warning.hpp"

namespace gt {

namespace {

using Clock = std::chrono::steady_clock;

// A row's sampling seed: the record's id and [eval].seed, so that an answer is the same whatever
// batch or rank it is generated on and whichever other records are in the file.
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

// Fault injection for the tests: GRAPHTUNE_TEST_KILL_IN_EVAL=RANK:K kills that world rank once it
// has committed K batches, in an eval that resumed nothing (a restart inherits the variable and
// must get past that point); GRAPHTUNE_TEST_EVAL_SLOW_MS=MS pauses every rank that long after
// each batch it commits, so that a test can stop an eval of a tiny model half way.
void eval_test_hooks(int rank, int64_t committed_here, int64_t resumed) {
  if (const char* v = std::getenv("GRAPHTUNE_TEST_KILL_IN_EVAL");
      v && resumed == 0 && std::to_string(rank) + ":" + std::to_string(committed_here) == v) {
    std::fprintf(stderr, "graphtune: test: rank %d killed after %lld committed batches at %.3f\n", rank,
                 static_cast<long long>(committed_here),
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  }
  if (const char* ms = std::getenv("GRAPHTUNE_TEST_EVAL_SLOW_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

std::string out_dir_of(const JobConfig& cfg, const std::string& out_flag) {
  const std::string out = out_flag.empty() ? cfg.eval.out_dir : out_flag;
  if (out.empty()) fail("--out", "must not be empty");
  return out;
}

// What the answers depend on: the inputs' content and every setting a token of an answer or the
// cut into batches follows. A resumed eval must match it entry by entry.
EvalFingerprint eval_fingerprint(const JobConfig& cfg) {
  auto content = [](const std::string& path) { return path_exists(path) ? content_signature(path) : path; };
  return {
      {"[data].instructions", content(cfg.data.instructions)},
      {"[data].features", content(cfg.data.features)},
      {"[data].graph", cfg.data.features.empty() ? cfg.data.graph : ""},
      {"[data].max_len", std::to_string(cfg.data.max_len)},
      {"[data].skip_invalid", cfg.data.skip_invalid ? "true" : "false"},
      {"[model].path", cfg.model.path},
      {"[model].path's files", content(cfg.model.path)},
      {"[model].projector", content(cfg.model.projector)},
      {"[model].adapter", content(cfg.model.adapter)},
      {"[model].graph_encoder", content(cfg.model.graph_encoder)},
      {"[model].dtype", name_of(cfg.model.dtype)},
      {"[eval].protocol", name_of(cfg.eval.protocol)},
      {"[eval].template", cfg.eval.chat_template},
      {"[eval].temperature", std::to_string(cfg.eval.temperature)},
      {"[eval].top_p", std::to_string(cfg.eval.top_p)},
      {"[eval].seed", std::to_string(cfg.eval.seed)},
      {"[eval].max_new_tokens", std::to_string(cfg.eval.max_new_tokens)},
      {"[eval].batch_size", std::to_string(cfg.eval.batch_size)},
      {"[eval].text_only", cfg.eval.text_only ? "true" : "false"},
      {"[eval].answers", cfg.eval.answers},
  };
}

// Everything that can be wrong with the job before any weight is read, the same on every rank:
// the layout against the model, and the output folder against --resume / --overwrite.
void check_eval_job(const JobConfig& cfg, const std::string& out_dir, int world_size) {
  const int64_t n_layers = cfg.model.path.empty() ? cfg.model.n_layers : read_model_config(cfg.model.path).n_layers;
  check_parallel_layout(cfg, world_size, static_cast<int>(n_layers), ConfigUse::kEval);
  if (cfg.eval.resume && cfg.eval.overwrite)
    fail("--resume", "and --overwrite both given: continue the interrupted eval or replace it, not both");
  const EvalProgress progress(out_dir);
  if (!progress.interrupted()) return;
  const int64_t batches = progress.batches();
  if (cfg.eval.overwrite) return;
  if (!cfg.eval.resume) {
    int64_t done = 0;
    for (bool b : progress.committed(batches)) done += b ? 1 : 0;
    fail(out_dir, "holds an interrupted eval (" + std::to_string(done) + " of " + std::to_string(batches) +
                      " batches answered): --resume continues it, --overwrite starts over");
  }
  if (const std::string what = progress.changed(eval_fingerprint(cfg)); !what.empty())
    fail("--resume", out_dir + ": " + what + " changed since the interrupted eval began: run it as it was, or "
                                             "--overwrite to start over");
}

// World rank 0 waits until every batch is committed. The other replicas may take long, but they
// commit as they go: only a wait with no new batch for `timeout_s` is a peer that stalled or
// died (under the launcher, which watches every rank, the job has ended well before).
enum class Wait { kAll, kStopped };
Wait wait_for_batches(const EvalProgress& progress, int64_t batches, double timeout_s, const World& world) {
  int64_t seen = -1;
  auto last_new = Clock::now();
  for (;;) {
    const std::vector<bool> done = progress.committed(batches);
    const auto n = static_cast<int64_t>(std::count(done.begin(), done.end(), true));
    if (n == batches) return Wait::kAll;
    if (control::stop_requested()) return Wait::kStopped;
    if (n != seen) {
      seen = n;
      last_new = Clock::now();
    } else if (timeout_s > 0 && std::chrono::duration<double>(Clock::now() - last_new).count() > timeout_s) {
      std::string missing;
      for (int64_t b = 0, shown = 0; b < batches && shown < 8; ++b)
        if (!done[static_cast<size_t>(b)]) missing += (shown++ ? ", " : "") + std::to_string(b);
      const std::string line = "eval: no batch committed in " + progress.dir() + " for " +
                               std::to_string(static_cast<int>(timeout_s)) + " s ([parallelism].timeout_s) and " +
                               std::to_string(batches - n) + " missing (" + missing +
                               "): a rank stalled or died, or the ranks do not share this folder";
      control::report_error(line);
      std::fprintf(stderr, "graphtune: error: rank %d: %s\n", world.rank(), line.c_str());
      std::fflush(stderr);
      world.abort(kExitRunFailed);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// What the pipeline's stages did against what its schedule allows: every stage's busy share, and
// the idle fraction the simulator gives for the same batches at the stages' measured costs.
void report_pipeline(const PipelineDecodeStats& mine, ParallelRuntime& rt, int slots) {
  auto row = torch::tensor({mine.wall_s, mine.busy_s, mine.prefill_s, static_cast<double>(mine.prefill_tokens),
                            mine.step_s, static_cast<double>(mine.steps)},
                           torch::kFloat64);
  const torch::Tensor all = rt.host.pp->all_gather(row.view({1, 6}));  // [pp, 6]
  if (!rt.reports()) return;
  auto a = all.accessor<double, 2>();
  const int p = rt.shape.pp;
  std::string busy;
  double wall = 0, busy_sum = 0;
  DecodeSimCosts costs;
  costs.prefill_per_token = costs.step_fixed = costs.step_per_row = costs.head_per_row = 0;
  for (int s = 0; s < p; ++s) {
    wall = std::max(wall, a[s][0]);
    busy_sum += a[s][1];
    busy += (s ? ", " : "") + std::to_string(static_cast<int>(100 * a[s][1] / std::max(a[s][0], 1e-9) + 0.5)) + "%";
    // The schedule's stages are charged the slowest stage's rates.
    if (a[s][3] > 0) costs.prefill_per_token = std::max(costs.prefill_per_token, a[s][2] / a[s][3]);
    if (a[s][5] > 0) costs.step_fixed = std::max(costs.step_fixed, a[s][4] / a[s][5]);
  }
  const double idle = wall > 0 ? 1.0 - busy_sum / (p * wall) : 0.0;
  const DecodeSimResult sim = simulate_decode(p, slots, mine.batches, costs);
  std::fprintf(stderr,
               "graphtune: eval: pipeline of %d stages, %d batches in flight: stages busy %s of %.1f s, idle %.1f%% "
               "(its schedule at these stages' costs: %.1f%%)\n",
               p, slots, busy.c_str(), wall, 100 * idle, sim.ok() ? 100 * sim.idle_fraction : -1.0);
}

int evaluate(const JobConfig& cfg, const std::string& out_dir, const World& world, const c10::Device& device) {
  if (cfg.training.threads > 0) torch::set_num_threads(static_cast<int>(cfg.training.threads));
  const auto t0 = Clock::now();
  // Records, class lists and references before any weight is read: a bad record costs nothing.
  std::vector<InstructionRecord> records = read_job_records(cfg.data);
  const std::map<std::string, DatasetClasses> classes = eval_class_lists(cfg, records);
  std::vector<EvalReference> refs = eval_references(records, classes, cfg.data.instructions);
  // Under --skip-invalid the check waits for the drop below: a record that is dropped anyway
  // (a node beyond the graph, say) must not refuse the eval for its answer's wording.
  const bool within_choices = cfg.eval.answers == "choices";
  if (within_choices && !cfg.data.skip_invalid) check_answers_are_choices(records, refs, classes, cfg.data.instructions);

  // The ranks form their groups once the model's shape is known; each then reads only its
  // pipeline stage's weights.
  std::optional<ParallelRuntime> runtime;
  const size_t before = records.size();
  GraphGptSetup s = build_graphgpt(
      cfg, device,
      [&](const StageWeights& w) {
        runtime.emplace(make_parallel_runtime(cfg.parallelism, world, w));
        return LlamaStage{runtime->first_layer, runtime->last_layer, runtime->first_stage(), runtime->last_stage()};
      },
      &records);
  ParallelRuntime& rt = *runtime;
  const bool reports = rt.reports();
  if (records.size() != before) refs = eval_references(records, classes, cfg.data.instructions);
  if (within_choices && cfg.data.skip_invalid) check_answers_are_choices(records, refs, classes, cfg.data.instructions);
  if (reports && s.projector_from.empty())
    std::fprintf(stderr, "graphtune: eval: no [model].projector: the projector is fresh (untrained)\n");
  if (const std::string note = graphgpt_keys_note(s.model->llm->config(), cfg.model.path); reports && !note.empty())
    std::fprintf(stderr, "graphtune: %s\n", note.c_str());
  // Every prompt before the first answer: a bad record (node id, length) fails fast.
  const ChatTemplate tmpl = chat_template_named(cfg.eval.chat_template, cfg.where("eval", "template"));
  const int32_t stop_id = chat_stop_id(tmpl, *s.tokenizer);  // where each answer ends
  auto example_of = [&](size_t i) {
    const InstructionRecord& r = records[i];
    return make_prompt_example(cfg.eval.text_only ? text_only_record(r) : r, s.features, *s.tokenizer,
                               cfg.data.max_len, cfg.data.instructions, tmpl);
  };
  // Kept are the prompts' tokens, what ordering and cutting them needs; their graphs' features (a
  // [nodes, features] table a graph: gigabytes for arXiv's test set, on every rank) are gathered
  // again for the batches this rank embeds. The graphs stay counted (as undefined tensors), which
  // tells a graph prompt from a text-only one.
  std::vector<GraphExample> examples;
  examples.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    examples.push_back(example_of(i));
    for (auto& x : examples.back().x) x = torch::Tensor();
    for (auto& e : examples.back().edge_index) e = torch::Tensor();
  }
  if (reports && cfg.eval.text_only)
    std::fprintf(stderr, "graphtune: eval: text only: the <graph> markers are dropped, no graph token is spliced\n");
  int64_t longest_reference = 0;
  const int64_t max_new_tokens = cfg.eval.max_new_tokens > 0
                                     ? cfg.eval.max_new_tokens
                                     : auto_max_new_tokens(refs, *s.tokenizer, &longest_reference);
  const bool greedy = cfg.eval.temperature <= 0;
  // A repeated prompt answered once (order_prompts) shares its record's choices: records of one
  // prompt are of one dataset wherever the prompt lists its classes, as data build's do.
  const std::vector<std::shared_ptr<const AnswerChoices>> choices =
      within_choices
          ? eval_answer_choices(records, refs, classes, *s.tokenizer, tmpl, stop_id, cfg.eval.max_new_tokens)
          : std::vector<std::shared_ptr<const AnswerChoices>>{};
  if (reports) {
    const std::string decoding =
        greedy ? std::string("greedy") : "sampling at temperature " + std::to_string(cfg.eval.temperature);
    const std::string budget_why =
        cfg.eval.max_new_tokens > 0 ? ""
                                    : " (the longest reference answer is " + std::to_string(longest_reference) + " tokens)";
    const std::string within = choices.empty() ? "" : " within the listed answers (class names, yes or no)";
    std::fprintf(stderr, "graphtune: eval: protocol %s, template %s, %s%s, up to %lld new tokens%s\n",
                 name_of(cfg.eval.protocol), chat_template_name(tmpl), decoding.c_str(), within.c_str(),
                 static_cast<long long>(max_new_tokens), budget_why.c_str());
  }

  GraphGpt& model = s.model;
  model->eval();
  // Shortest prompts first, each repeat answered once where decoding is greedy (order_prompts);
  // the answers go back to file order at the end.
  const PromptOrder order = order_prompts(examples, greedy);
  if (reports && order.run.size() < examples.size())
    std::fprintf(stderr, "graphtune: eval: %zu distinct prompts of %zu records (greedy: a repeat gets the same answer)\n",
                 order.run.size(), examples.size());
  std::vector<int64_t> lengths;
  for (const GraphExample& e : examples) lengths.push_back(static_cast<int64_t>(e.tokens.input_ids.size()));
  // The prefix the prompts share, computed once: a batch whose rows all begin with it starts
  // each prefill after it.
  const SharedPrefix shared = cfg.eval.prefix_cache ? find_shared_prefix(examples) : SharedPrefix{};
  if (reports && shared.length() > 0) {
    const auto n = std::count(shared.shares.begin(), shared.shares.end(), true);
    std::fprintf(stderr, "graphtune: eval: a prefix of %lld tokens shared by %lld of %zu prompts is computed once\n",
                 static_cast<long long>(shared.length()), static_cast<long long>(n), examples.size());
  }
  const std::vector<EvalBatch> plan =
      plan_eval_batches(order.run, order.answer_of, lengths, cfg.eval.batch_size, max_new_tokens);
  const auto n_batches = static_cast<int64_t>(plan.size());

  // A fresh eval clears the folder's earlier results and progress before the first answer is
  // committed; a resumed one learns which batches are in. World rank 0 reads the folder, so that
  // every rank works from one view of it. It also opens this attempt's claims: the last entry.
  const EvalProgress progress(out_dir);
  auto done = torch::zeros({n_batches + 1}, torch::kInt64);
  if (reports) {
    if (cfg.eval.resume && progress.interrupted()) {
      const std::vector<bool> committed = progress.committed(n_batches);
      for (int64_t b = 0; b < n_batches; ++b) done[b] = committed[static_cast<size_t>(b)] ? 1 : 0;
    } else {
      if (cfg.eval.resume)
        std::fprintf(stderr, "graphtune: eval: --resume: %s holds no interrupted eval; starting\n", out_dir.c_str());
      for (const std::string& f : eval_result_files()) remove_tree(join_path(out_dir, f));
      progress.start(eval_fingerprint(cfg), n_batches);
    }
    done[n_batches] = progress.new_attempt();
  }
  rt.host.world->broadcast(done, 0);
  const int64_t attempt = done[n_batches].item<int64_t>();
  std::vector<bool> is_done(static_cast<size_t>(n_batches));
  int64_t resumed = 0, resumed_batches = 0;
  for (int64_t b = 0; b < n_batches; ++b) {
    is_done[static_cast<size_t>(b)] = done[b].item<int64_t>() != 0;
    if (is_done[static_cast<size_t>(b)]) resumed += plan[static_cast<size_t>(b)].records, ++resumed_batches;
  }
  if (reports && resumed_batches > 0)
    std::fprintf(stderr, "graphtune: eval: --resume: %lld of %lld batches (%lld of %zu records) were answered; continuing\n",
                 static_cast<long long>(resumed_batches), static_cast<long long>(n_batches),
                 static_cast<long long>(resumed), records.size());

  const auto answering_from = Clock::now();  // the model loaded, the batches known: generation's clock
  // The replicas (dp x tp: tensor-parallel ranks answer batches of their own, the projector being
  // whole on each) claim the batches costliest first, each the next one when it is free, so the
  // answers' lengths, known only as they are generated, cannot leave one replica with the tail.
  const std::vector<int64_t> claim_order = eval_batch_order(plan, is_done);
  size_t next_in_order = 0;
  auto claim_next = [&]() -> int64_t {
    while (next_in_order < claim_order.size()) {
      const int64_t b = claim_order[next_in_order++];
      if (progress.claim(attempt, b)) return b;
    }
    return -1;
  };
  const auto total = static_cast<int64_t>(records.size());
  int64_t answered = 0, batches_here = 0;
  const bool commits = rt.last_stage();  // the rank whose answers a replica's batches end with
  if (commits) control::report_eval_progress(0, resumed, total);

  auto shares_prefix = [&](int64_t b) {
    if (shared.length() == 0) return false;
    for (size_t e : plan[static_cast<size_t>(b)].examples)
      if (!shared.shares[e]) return false;
    return true;
  };
  auto examples_of = [&](int64_t b) {
    std::vector<GraphExample> chunk;
    for (size_t e : plan[static_cast<size_t>(b)].examples) chunk.push_back(example_of(e));
    return chunk;
  };
  auto sampling_of = [&](int64_t b) {
    AnswerSampling sampling;
    sampling.temperature = static_cast<float>(cfg.eval.temperature);
    sampling.top_p = static_cast<float>(cfg.eval.top_p);
    if (sampling.temperature > 0)
      for (size_t e : plan[static_cast<size_t>(b)].examples) sampling.row_seeds.push_back(row_seed(cfg.eval.seed, records[e].id));
    if (!choices.empty())
      for (size_t e : plan[static_cast<size_t>(b)].examples) sampling.row_choices.push_back(choices[e].get());
    return sampling;
  };
  auto commit = [&](int64_t b, std::vector<std::vector<int32_t>>& answers) {
    const EvalBatch& batch = plan[static_cast<size_t>(b)];
    std::vector<EvalAnswer> rows;
    for (size_t k = 0; k < batch.examples.size(); ++k) rows.push_back({batch.examples[k], std::move(answers[k])});
    progress.commit(b, rows);
    answered += batch.records;
    ++batches_here;
    control::report_eval_progress(answered, resumed, total);
    if (world.size() == 1)
      std::fprintf(stderr, "graphtune: eval: batch %lld/%lld, %lld answers\n",
                   static_cast<long long>(batches_here + resumed_batches), static_cast<long long>(n_batches),
                   static_cast<long long>(answered + resumed));
    else
      std::fprintf(stderr, "graphtune: eval: rank %d: its batch %lld (of %lld in all), %lld answers\n", world.rank(),
                   static_cast<long long>(batches_here), static_cast<long long>(n_batches),
                   static_cast<long long>(answered));
    eval_test_hooks(world.rank(), batches_here, resumed);
  };

  bool stopped = false;
  if (rt.shape.pp == 1) {
    const c10::DeviceType autocast_device = model->projector->weight().device().type();
    PromptPrefix prefix;
    if (shared.length() > 0) {
      torch::NoGradGuard no_grad;
      AutocastScope autocast(cfg.model.bf16(), autocast_device);
      GraphGptBatch b;
      b.input_ids = torch::tensor(std::vector<int64_t>(shared.tokens.begin(), shared.tokens.end()), torch::kInt64)
                        .view({1, shared.length()})
                        .to(device);
      compute_prompt_prefix(model->llm, model->embed(b), 0, model->llm->config().n_layers, &prefix);
    }
    for (;;) {
      if (control::stop_requested()) {
        stopped = true;
        break;
      }
      const int64_t b = claim_next();
      if (b < 0) break;
      GraphGptBatch batch = collate(examples_of(b), s.tokenizer->pad_id());
      std::vector<std::vector<int32_t>> answers;
      {
        // bf16: the LLM and encoder are stored in bf16 (build_graphgpt), matmuls run in bf16.
        AutocastScope autocast(cfg.model.bf16(), autocast_device);
        answers = generate_graph_answers(model, model->prepare(batch, device), max_new_tokens, stop_id, sampling_of(b),
                                         shares_prefix(b) ? &prefix : nullptr);
      }
      commit(b, answers);
    }
  } else {
    const int slots = static_cast<int>(cfg.eval.in_flight > 0 ? cfg.eval.in_flight : rt.shape.pp + 1);
    PipelineBatches io;
    io.prompts = [&](int64_t b) { return collate(examples_of(b), s.tokenizer->pad_id()); };
    io.lengths = [&](int64_t b) {
      std::vector<int64_t> lens;
      for (size_t e : plan[static_cast<size_t>(b)].examples) lens.push_back(lengths[e]);
      return lens;
    };
    io.sampling = sampling_of;
    io.finished = commit;
    io.stop_requested = [&] { return stopped = stopped || control::stop_requested(); };
    io.prefix = shared.tokens;
    io.shares_prefix = shares_prefix;
    const PipelineDecodeStats stats =
        decode_pipelined(model, rt, claim_next, slots, max_new_tokens, stop_id, device, cfg.model.bf16(), io);
    report_pipeline(stats, rt, slots);
  }
  stopped = stopped || control::stop_requested();
  if (!reports) {
    if (stopped) control::report_stopped(resumed + answered);
    control::report_done();
    return 0;
  }
  if (stopped || wait_for_batches(progress, n_batches, cfg.parallelism.timeout_s, world) == Wait::kStopped) {
    std::fprintf(stderr, "graphtune: eval: stopped; the answers committed in %s are kept (--resume continues)\n",
                 progress.dir().c_str());
    control::report_stopped(resumed + answered);
    control::report_done();
    return 0;
  }

  const double answering_s = std::chrono::duration<double>(Clock::now() - answering_from).count();
  // Every batch is in: the answers back in record order, scored, written, and the progress gone.
  std::vector<const std::vector<int32_t>*> by_example(examples.size(), nullptr);
  std::vector<std::vector<EvalAnswer>> read(static_cast<size_t>(n_batches));
  for (int64_t b = 0; b < n_batches; ++b) {
    read[static_cast<size_t>(b)] = progress.read(b);
    const EvalBatch& batch = plan[static_cast<size_t>(b)];
    if (read[static_cast<size_t>(b)].size() != batch.examples.size())
      fail(progress.dir(), "batch " + std::to_string(b) + " holds " + std::to_string(read[static_cast<size_t>(b)].size()) +
                               " answers, not " + std::to_string(batch.examples.size()) + ": --overwrite starts over");
    for (size_t k = 0; k < batch.examples.size(); ++k) {
      const EvalAnswer& a = read[static_cast<size_t>(b)][k];
      if (a.example != batch.examples[k])
        fail(progress.dir(), "batch " + std::to_string(b) + " answers other records than this eval's: --overwrite starts over");
      by_example[a.example] = &a.tokens;
    }
  }
  std::vector<std::string> answers;
  answers.reserve(records.size());
  int64_t at_budget = 0;  // answers cut by max_new_tokens rather than ended by the model
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<int32_t>& a = *by_example[order.run[order.answer_of[i]]];
    at_budget += static_cast<int64_t>(a.size()) >= max_new_tokens ? 1 : 0;
    answers.push_back(trim_whitespace(s.tokenizer->decode(a)));
  }
  if (at_budget > 0)
    std::fprintf(stderr, "graphtune: eval: %lld answers reached max_new_tokens (%lld) and were cut there\n",
                 static_cast<long long>(at_budget), static_cast<long long>(max_new_tokens));
  EvalSetup setup;
  setup.projector_from = s.projector_from;
  setup.template_name = chat_template_name(tmpl);
  setup.max_new_tokens = max_new_tokens;
  setup.answers_at_budget = at_budget;
  const EvalScores scores = score_and_write_eval(cfg, records, refs, classes, answers, setup, out_dir);
  progress.remove();

  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(stderr,
               "graphtune: eval: n %lld, accuracy %.4f%s; %.1f s, of which answering %.1f s (%.2f records/s on %d "
               "rank(s)); wrote %s/predictions.jsonl, metrics.json and graphgpt/\n",
               static_cast<long long>(total), scores.accuracy, scores.summary.c_str(), secs, answering_s,
               static_cast<double>(total - resumed) / std::max(answering_s, 1e-9), world.size(), out_dir.c_str());
  control::report_eval(scores.metrics_json);
  control::report_done();
  return 0;
}

JobConfig read_eval_job(const std::string& config_path, const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  return read_job_config(config_path, overrides, ConfigUse::kEval);
}

int run_eval(const std::string& config_path, const std::string& out_flag, const std::vector<std::string>& extra) {
  int argc = 0;
  char** argv = nullptr;
  World world(&argc, &argv);
  c10::Device device = c10::kCPU;
  return run_on_rank(world, device, [&] {
    control::connect(world.rank(), world.size());  // when the launcher started it
    JobConfig cfg = read_eval_job(config_path, extra);
    const std::string out_dir = out_dir_of(cfg, out_flag);
    // Before any communicator forms: NCCL's go to the device current when they are made.
    device = use_job_device(cfg);  // a device this host has, or one line saying why not
    check_eval_job(cfg, out_dir, world.size());
    if (!control::connected() && world.rank() == 0)  // else the launcher's preflight said it
      warn_if_template_differs(cfg, cfg.eval.chat_template, "eval");
    control::report_device(describe_device(device));
    // Without the launcher, world rank 0 holds the output folder for this job, as the launcher would.
    std::unique_ptr<RunFolderLock> lock;
    if (!control::connected() && world.rank() == 0) {
      make_dirs(out_dir);
      lock = std::make_unique<RunFolderLock>(out_dir, "graphtune-worker eval");
    }
    return evaluate(cfg, out_dir, world, device);
  });
}

// The launcher's preflight: the config, the layout and the output folder for `world_size` ranks,
// in one process, before anything is started.
int check_eval(const std::string& config_path, const std::string& out_flag, const std::vector<std::string>& extra,
               int world_size) {
  const JobConfig cfg = read_eval_job(config_path, extra);
  check_eval_job(cfg, out_dir_of(cfg, out_flag), world_size);
  choose_job_device(cfg);  // a device this host has, or one line saying why not
  warn_if_template_differs(cfg, cfg.eval.chat_template, "eval");
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto config = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto skip = std::make_shared<bool>(false);
  auto resume = std::make_shared<bool>(false);
  auto overwrite = std::make_shared<bool>(false);
  auto check_world = std::make_shared<int>(0);
  auto device = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "eval", "answer instruction records with GraphGPT and score them (predictions.jsonl, metrics.json)");
  sub->add_option("-c,--config", *config, "TOML job config (the training config; [eval] for batch_size, max_new_tokens, out_dir)");
  sub->add_option("--out", *out, "output folder (default [eval].out_dir, i.e. [job].out_dir/eval)");
  sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many (= --data.skip_invalid true)");
  sub->add_flag("--resume", *resume, "continue an interrupted eval from its committed answers (= --eval.resume true)");
  sub->add_flag("--overwrite", *overwrite, "replace an interrupted eval's answers (= --eval.overwrite true)");
  sub->add_option("--check-world", *check_world,
                  "check the config, the layout and the output folder for this many ranks, then exit (the launcher's "
                  "preflight)")
      ->group("");
  sub->add_option("--device", *device, "auto | cpu | cuda (= --training.device)");
  sub->allow_extras();
  sub->callback([sub, config, out, skip, resume, overwrite, check_world, device, &exit_code] {
    auto extra = sub->remaining();
    if (!device->empty()) extra.insert(extra.end(), {"--training.device", *device});
    if (*skip) extra.insert(extra.end(), {"--data.skip_invalid", "true"});
    if (*resume) extra.insert(extra.end(), {"--eval.resume", "true"});
    if (*overwrite) extra.insert(extra.end(), {"--eval.overwrite", "true"});
    exit_code = *check_world > 0 ? check_eval(*config, *out, extra, *check_world) : run_eval(*config, *out, extra);
  });
}

}  // namespace gt
