// graphtune plan: how much memory a training job needs per GPU (or per CPU rank), for every
// dp x pp x tp layout of the devices, and which layout to use (launcher/memory_plan.hpp).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/error.hpp"
#include "config/job_config.hpp"
#include "launcher/commands.hpp"
#include "launcher/memory_plan.hpp"

namespace gt {

namespace {

struct PlanOptions {
  std::string config, model, gpus, device = "gpu", stage = "graph_matching", dtype = "bf16", schedule = "1f1b";
  int64_t seq = 2048, micro_batch = 1, microbatches = 1;
  int ranks = 0;
  bool checkpointing = false;
};

// The job a config describes, and the layout it asks for (dp, pp, tp).
PlanJob job_from_config(const JobConfig& cfg, Layout& layout) {
  PlanJob job;
  const bool graph = is_graph_phase(cfg.training.stage);
  if (!cfg.model.path.empty()) {
    job.model = resolve_model(cfg.model.path);
    job.weights_from_file = true;
  } else {
    // The fresh model of [model]; its vocabulary is the tokenizer's: the built-in byte
    // tokenizer's 259 pieces, or [model].vocab_size for one trained on the job's texts.
    job.model.name = "fresh [model] of " + (cfg.file.empty() ? std::string("the defaults") : cfg.file);
    job.model.dim = cfg.model.dim, job.model.n_layers = cfg.model.n_layers, job.model.n_heads = cfg.model.n_heads;
    job.model.n_kv_heads = cfg.model.n_kv_heads, job.model.hidden_dim = cfg.model.hidden_dim;
    job.model.vocab_size = cfg.model.tokenizer == "train" ? cfg.model.vocab_size : 259;
    job.model.tied = true;
  }
  job.stage = cfg.training.stage;
  // Phase lm's windows are seq_len + 1 tokens (the last one is the last position's label);
  // the graph phases pad a batch to its longest record, at most max_len: the bound is planned.
  job.seq = graph ? cfg.data.max_len : cfg.training.seq_len + 1;
  layout = Layout{static_cast<int>(cfg.parallelism.dp), static_cast<int>(cfg.parallelism.pp), static_cast<int>(cfg.parallelism.tp)};
  job.microbatches = cfg.parallelism.microbatches;
  // The layout the config asks for, checked as the worker checks it (its micro-batches divide the
  // batch, its stages fit the model's layers).
  check_parallel_layout(cfg, layout.dp * layout.pp * layout.tp, static_cast<int>(job.model.n_layers));
  job.micro_batch = cfg.training.batch_size / (cfg.parallelism.dp * cfg.parallelism.microbatches);
  // The global batch: the other layouts split it their own way.
  job.global_batch = cfg.training.batch_size;
  job.bf16 = cfg.model.bf16();
  job.checkpointing = cfg.training.activation_checkpointing;
  job.trainable = cfg.training.trainable;
  job.lora_per_layer = lora_layer_params(job.model, cfg.lora.rank, cfg.lora.targets);
  job.schedule = cfg.parallelism.schedule;
  return job;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

void print_layout(const LayoutPlan& p, const PlanJob& job, const Devices& d, bool mark) {
  auto size = [&](double b) { return d.cpu ? mib(b) : gib(b); };
  std::printf("%slayout dp %d pp %d tp %d", mark ? "* " : "  ", p.layout.dp, p.layout.pp, p.layout.tp);
  if (job.global_batch > 0) {
    const PlanJob at = job_at(job, p.layout);
    std::printf(" (per rank: %lld micro-batch%s of %lld)", static_cast<long long>(at.microbatches),
                at.microbatches == 1 ? "" : "es", static_cast<long long>(at.micro_batch));
  }
  std::printf(":");
  const double keep = safety_margin_bytes(d);
  if (d.cpu) std::printf(" peak %s per rank\n", size(p.peak).c_str());
  else if (p.fits) std::printf(" fits, %s free on the fullest GPU\n", size(p.margin).c_str());
  else if (p.margin >= 0)
    std::printf(" does not hold the margin: %s free on the fullest GPU, %s kept\n", size(p.margin).c_str(), size(keep).c_str());
  else std::printf(" does not fit by %s\n", size(-p.margin).c_str());
  for (const RankMemory& r : p.stages) {
    std::printf("    stage %d (layers [%lld, %lld), %d micro-batch%s in flight): weights %s", r.stage,
                static_cast<long long>(r.first_layer), static_cast<long long>(r.last_layer), r.in_flight,
                r.in_flight == 1 ? "" : "es", size(r.weights + r.autocast_copies).c_str());
    std::printf(" | activations %s (with checkpointing %s, without %s)", size(r.activations).c_str(),
                size(r.activations_ckpt).c_str(), size(r.activations_full).c_str());
    std::printf(" | %lld trainable: grads %s, AdamW %s | comm %s", static_cast<long long>(r.trainable_params),
                size(r.grads).c_str(), size(r.optimizer).c_str(), size(r.comm).c_str());
    if (d.cpu) std::printf(" | runtime %s", size(r.overhead).c_str());
    else std::printf(" | CUDA context + cuBLAS %s, NCCL %s (estimates)", size(r.overhead).c_str(), size(r.nccl).c_str());
    std::printf(" | allocator %s", size(r.allocator).c_str());
    if (d.cpu) std::printf(" | building %s", size(r.setup_peak).c_str());
    else std::printf(" | host RAM at load %s", size(r.host_ram).c_str());
    std::printf(" | total %s\n", size(r.total).c_str());
  }
}

int run_plan(const PlanOptions& o, const std::vector<std::string>& extra) {
  PlanJob job;
  Layout asked{0, 0, 0};
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  if (!o.config.empty()) {
    job = job_from_config(read_job_config(o.config, overrides, ConfigUse::kTrain), asked);
  } else {
    if (!overrides.empty()) fail("command line", "--section.key overrides need a config (-c FILE)");
    if (o.model.empty()) fail("plan", "--model PRESET|FOLDER|FILE.bin|FILE.gguf or -c CONFIG is required");
    job.model = resolve_model(o.model);
    job.weights_from_file = true;
    job.seq = o.seq;
    job.micro_batch = o.micro_batch;
    job.microbatches = o.microbatches;
    const std::optional<DType> dtype = value_named<DType>(o.dtype);
    if (!dtype || *dtype == DType::kFp16) fail("--dtype", "must be bf16 or fp32 (got '" + o.dtype + "')");
    job.bf16 = *dtype == DType::kBf16;
    job.checkpointing = o.checkpointing;
    job.stage = plan_stage(o.stage);
  }
  check_plan_job(job);
  if (o.config.empty()) {
    const std::optional<ScheduleKind> schedule = value_named<ScheduleKind>(o.schedule);
    if (!schedule) fail("--schedule", "must be 1f1b or gpipe");
    job.schedule = *schedule;
  }

  Devices d;
  if (o.device == "cpu") {
    d.cpu = true;
    d.count = o.ranks > 0 ? o.ranks : (asked.dp > 0 ? asked.dp * asked.pp * asked.tp : 1);
  } else if (o.device == "gpu") {
    if (o.gpus.empty()) fail("plan", "--gpus COUNTxSIZE (e.g. 2x24GB) or --device cpu is required");
    d = parse_gpus(o.gpus);
  } else {
    fail("--device", "must be gpu or cpu (got '" + o.device + "')");
  }

  std::printf("graphtune plan: %s (%.3f B parameters: dim %lld, %lld layers, %lld heads, %lld kv heads, hidden %lld, "
              "vocab %lld%s)\n",
              job.model.name.c_str(), static_cast<double>(job.model.total_params()) / 1e9,
              static_cast<long long>(job.model.dim), static_cast<long long>(job.model.n_layers),
              static_cast<long long>(job.model.n_heads), static_cast<long long>(job.model.n_kv_heads),
              static_cast<long long>(job.model.hidden_dim), static_cast<long long>(job.model.vocab_size),
              job.model.tied ? ", tied" : "");
  const std::string batch =
      job.global_batch > 0
          ? "global batch " + std::to_string(job.global_batch) + " split per layout below"
          : "micro-batch " + std::to_string(job.micro_batch) + " per rank, " + std::to_string(job.microbatches) +
                " pipeline micro-batches";
  std::printf("  stage %s, %lld tokens x %s (%s), %s, activation checkpointing %s, on %d %s\n", name_of(job.stage),
              static_cast<long long>(job.seq), batch.c_str(), name_of(job.schedule), job.bf16 ? "bf16" : "fp32",
              job.checkpointing ? "on" : "off", d.count,
              d.cpu ? "CPU ranks" : ("GPUs of " + gib(d.bytes_each)).c_str());

  std::vector<LayoutPlan> plans;
  for (const Layout& l : layouts_for(d.count, job)) {
    if (asked.dp > 0 && d.cpu && asked.dp * asked.pp * asked.tp == d.count &&
        (l.dp != asked.dp || l.pp != asked.pp || l.tp != asked.tp))
      continue;  // a config run on CPU: its own layout only, as the worker will run it
    plans.push_back(plan_layout(job, d, l));
  }
  if (plans.empty()) fail("plan", "no dp x pp x tp layout of " + std::to_string(d.count) + " ranks for this model");
  const int best = d.cpu ? -1 : recommend(plans);
  for (size_t i = 0; i < plans.size(); ++i) print_layout(plans[i], job, d, static_cast<int>(i) == best);
  if (d.cpu) return 0;
  const LayoutPlan* chosen = best >= 0 ? &plans[static_cast<size_t>(best)] : nullptr;
  // Checkpointing off and the margin thin or missing: the same job with it, as GraphGPT runs.
  std::optional<LayoutPlan> with_ckpt;
  if (!job.checkpointing && (!chosen || chosen->margin < 2 * safety_margin_bytes(d))) {
    PlanJob j = job;
    j.checkpointing = true;
    std::vector<LayoutPlan> alt = plan_all(j, d);
    const int i = recommend(alt);
    if (i >= 0) with_ckpt = alt[static_cast<size_t>(i)];
  }
  const LayoutPlan& host = chosen ? *chosen : with_ckpt ? *with_ckpt : plans.front();
  std::printf("host RAM per rank at load, dp %d pp %d tp %d: about %s (its stage's weights in their storage dtype, "
              "read tensor by tensor)%s\n",
              host.layout.dp, host.layout.pp, host.layout.tp, gib(host.host_ram).c_str(),
              d.count > 1 ? ("; all " + std::to_string(d.count) + " ranks on one host: up to " + gib(d.count * host.host_ram)).c_str() : "");
  const char* rule = "among the layouts that hold the margin, the most data parallelism, then the least communication "
                     "per step, then the most free memory";
  if (chosen) {
    const Layout& l = chosen->layout;
    std::printf("recommended: dp %d pp %d tp %d, %s free of the %s kept on each GPU (rule: %s)\n", l.dp, l.pp, l.tp,
                gib(chosen->margin).c_str(), gib(safety_margin_bytes(d)).c_str(), rule);
    if (with_ckpt)
      std::printf("  the margin is thin: with activation checkpointing (--training.activation_checkpointing true) "
                  "dp %d pp %d tp %d has %s free\n",
                  with_ckpt->layout.dp, with_ckpt->layout.pp, with_ckpt->layout.tp, gib(with_ckpt->margin).c_str());
    return 0;
  }
  if (with_ckpt) {
    const Layout& l = with_ckpt->layout;
    std::printf("recommended: dp %d pp %d tp %d with activation checkpointing (--training.activation_checkpointing "
                "true), %s free of the %s kept on each GPU: without it nothing holds the margin (rule: %s)\n",
                l.dp, l.pp, l.tp, gib(with_ckpt->margin).c_str(), gib(safety_margin_bytes(d)).c_str(), rule);
    return 0;
  }
  std::printf("nothing holds the %s margin on %d x %s; what would:\n", gib(safety_margin_bytes(d)).c_str(), d.count,
              gib(d.bytes_each).c_str());
  for (const Suggestion& s : suggestions(job, d)) {
    const LayoutPlan& p = s.best;
    std::printf("  %s: dp %d pp %d tp %d needs %s per GPU, %s\n", s.change.c_str(), p.layout.dp, p.layout.pp,
                p.layout.tp, gib(p.peak).c_str(),
                p.fits ? "fits" : ("does not fit by " + gib(safety_margin_bytes(d) - p.margin)).c_str());
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand("plan", "memory per GPU (or CPU rank) of a training job for each dp/pp/tp layout");
  sub->add_option("-c,--config", o->config, "a job config (model, seq, batch, dtype, stage from it)");
  sub->add_option("--model", o->model, "preset (vicuna-7b, smollm2, stories260K), Hugging Face folder, llama2.c .bin or GGUF file");
  sub->add_option("--gpus", o->gpus, "COUNTxSIZE, e.g. 2x24GB");
  sub->add_option("--device", o->device, "gpu (default) or cpu");
  sub->add_option("--ranks", o->ranks, "CPU ranks (with --device cpu; default: the config's dp x pp x tp)");
  sub->add_option("--seq", o->seq, "tokens per sequence (default 2048)");
  sub->add_option("--micro-batch", o->micro_batch, "sequences per micro-batch per GPU (default 1)");
  sub->add_option("--microbatches", o->microbatches, "pipeline micro-batches per step (default 1; at least pp)");
  sub->add_option("--stage", o->stage, "lm, graph_matching (default) or task");
  sub->add_option("--dtype", o->dtype, "bf16 (default) or fp32");
  sub->add_option("--schedule", o->schedule, "1f1b (default) or gpipe");
  sub->add_flag("--activation-checkpointing", o->checkpointing, "recompute each layer in backward");
  sub->allow_extras();
  sub->callback([sub, o, &exit_code] { exit_code = run_plan(*o, sub->remaining()); });
}

}  // namespace gt
