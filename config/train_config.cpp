#include "config/train_config.hpp"

#include <algorithm>

#include "common/config.hpp"
#include "common/error.hpp"
#include "layout/partition.hpp"

namespace gt {
namespace {

// [parallelism].partition as a list of first layers: "0, 6, 12". A string, not a TOML array,
// because ConfigReader hands out scalars only (and the same text works as an override).
// Only the syntax is checked here; the values need the model (check_parallel_layout).
std::vector<int> parse_layer_list(const ConfigReader& r, const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos)
      r.reject("parallelism", "partition",
               "expected \"balanced\" or the first layer of each stage, e.g. \"0,6,12\"; got \"" + text + "\"");
    out.push_back(std::stoi(item));
    pos = comma + 1;
  }
  return out;
}

// The whole reading and validation, on the reader of a file or of text.
TrainConfig read_train_config_from(ConfigReader r, const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& overrides,
                                   ConfigUse use) {
  const bool train = use == ConfigUse::kTrain;
  for (const auto& [k, v] : overrides) r.apply_override(k, v);
  TrainConfig c;
  c.path = path;
  auto positive = [&](const char* s, const char* k, int64_t dflt) {
    int64_t v = r.get_int(s, k, dflt);
    if (v <= 0) r.reject(s, k, "must be positive, got " + std::to_string(v));
    return v;
  };
  auto in_range = [&](const char* s, const char* k, double dflt, double lo, double hi) {
    double v = r.get_float(s, k, dflt);
    if (!(v >= lo && v <= hi))
      r.reject(s, k, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return v;
  };
  auto one_of = [&](const char* s, const char* k, const std::string& dflt, std::vector<std::string> allowed) {
    std::string v = r.get_string(s, k, dflt);
    std::string list;
    for (const auto& a : allowed) {
      if (a == v) return v;
      list += (list.empty() ? "" : ", ") + a;
    }
    r.reject(s, k, "'" + v + "' is not one of: " + list);
  };

  c.name = r.get_string("job", "name", c.name);
  if (c.name.empty()) r.reject("job", "name", "must not be empty");
  c.out_dir = r.get_string("job", "out_dir", "runs/" + c.name);

  c.model_path = r.get_string("model", "path", c.model_path);
  c.tokenizer = r.get_string("model", "tokenizer", c.tokenizer);
  // A fresh model's sizes, bounded far above any real LLaMA (405B: dim 16384, 126 layers) so
  // that a damaged value (2^46 typed for 46) is refused here, before anything is built from it.
  auto model_size = [&](const char* k, int64_t dflt, int64_t max) {
    const int64_t v = positive("model", k, dflt);
    if (v > max) r.reject("model", k, "must be at most " + std::to_string(max) + ", got " + std::to_string(v));
    return v;
  };
  c.vocab_size = model_size("vocab_size", c.vocab_size, int64_t{1} << 24);
  c.dim = model_size("dim", c.dim, int64_t{1} << 16);
  c.n_layers = model_size("n_layers", c.n_layers, int64_t{1} << 12);
  c.n_heads = model_size("n_heads", c.n_heads, int64_t{1} << 12);
  c.n_kv_heads = model_size("n_kv_heads", c.n_kv_heads, int64_t{1} << 12);
  c.hidden_dim = model_size("hidden_dim", c.hidden_dim, int64_t{1} << 18);
  c.max_seq_len = model_size("max_seq_len", c.max_seq_len, int64_t{1} << 24);
  c.dtype = one_of("model", "dtype", c.dtype, {"fp32", "bf16"});
  c.graph_encoder = r.get_string("model", "graph_encoder", c.graph_encoder);
  c.graph_encoder_prefix = r.get_string("model", "graph_encoder_prefix", c.graph_encoder_prefix);
  c.projector = r.get_string("model", "projector", c.projector);
  if (c.dim % c.n_heads) r.reject("model", "n_heads", "must divide dim (" + std::to_string(c.dim) + ")");
  if (c.n_heads % c.n_kv_heads) r.reject("model", "n_kv_heads", "must divide n_heads (" + std::to_string(c.n_heads) + ")");
  if ((c.dim / c.n_heads) % 2) r.reject("model", "n_heads", "head size dim/n_heads must be even for rotary embeddings");

  c.source = r.get_string("data", "source", c.source);
  c.data_seed = r.get_int("data", "seed", c.data_seed);
  c.nodes = positive("data", "nodes", c.nodes);
  c.classes = positive("data", "classes", c.classes);
  c.noise = in_range("data", "noise", c.noise, 0.0, 1.0);
  c.instructions = r.get_string("data", "instructions", c.instructions);
  c.graph = r.get_string("data", "graph", c.graph);
  c.features = r.get_string("data", "features", c.features);
  c.max_len = positive("data", "max_len", c.max_len);
  c.chat_template = one_of("data", "template", c.chat_template, {"vicuna_v1_1", "chatml"});
  c.num_workers = r.get_int("data", "num_workers", c.num_workers);
  c.skip_invalid = r.get_bool("data", "skip_invalid", c.skip_invalid);
  if (c.num_workers < 0) r.reject("data", "num_workers", "must be >= 0 (0 = prepare batches in the training thread)");

  c.stage = one_of("training", "stage", c.stage, {"lm", "grounding", "graph_matching", "task"});
  const bool graph_stage = c.stage == "graph_matching" || c.stage == "task";
  if (train) {
    if (graph_stage && c.instructions.empty())
      r.reject("data", "instructions", "stage '" + c.stage + "' needs GraphGPT instruction records (graphtune data build)");
    if (graph_stage && c.model_path.empty())
      r.reject("model", "path", "stage '" + c.stage + "' tunes graph tokens into an existing LLM: name it");
  } else {
    if (c.instructions.empty())
      r.reject("data", "instructions", "eval needs GraphGPT instruction records to answer (graphtune data build --split test)");
    if (c.model_path.empty()) r.reject("model", "path", "eval runs GraphGPT on an existing LLM: name it");
  }
  if (c.tokenizer == "train" && c.stage != "lm")
    r.reject("model", "tokenizer", "\"train\" (a new vocabulary) is for stage 'lm' only; name the model's tokenizer or \"auto\"");
  c.epochs = r.get_int("training", "epochs", c.epochs);
  if (train && c.epochs < 0) r.reject("training", "epochs", "must be >= 0");
  c.steps = r.get_int("training", "steps", graph_stage ? 0 : c.steps);
  if (train && (c.steps < 0 || (c.steps == 0 && (!graph_stage || c.epochs == 0))))
    r.reject("training", "steps", "must be positive (or 0 with [training].epochs set, for GraphGPT stages)");
  c.trainable = one_of("training", "trainable", c.trainable, {"graphgpt", "projector"});
  c.batch_size = positive("training", "batch_size", c.batch_size);
  c.seq_len = positive("training", "seq_len", c.seq_len);
  c.grad_accum_steps = positive("training", "grad_accum_steps", c.grad_accum_steps);
  c.seed = r.get_int("training", "seed", c.seed);
  c.max_grad_norm = in_range("training", "max_grad_norm", c.max_grad_norm, 0.0, 1e9);
  c.log_every = positive("training", "log_every", c.log_every);
  c.threads = r.get_int("training", "threads", c.threads);
  c.activation_checkpointing = r.get_bool("training", "activation_checkpointing", c.activation_checkpointing);
  if (c.threads < 0) r.reject("training", "threads", "must be >= 0 (0 = all cores)");
  c.on_nonfinite = one_of("training", "on_nonfinite", c.on_nonfinite, {"skip_step", "abort"});
  c.max_skipped_in_a_row = positive("training", "max_skipped_in_a_row", c.max_skipped_in_a_row);

  one_of("optimizer", "name", "adamw", {"adamw"});
  c.lr = in_range("optimizer", "lr", c.lr, 0.0, 10.0);
  c.weight_decay = in_range("optimizer", "weight_decay", c.weight_decay, 0.0, 10.0);
  c.beta1 = in_range("optimizer", "beta1", c.beta1, 0.0, 0.999999);
  c.beta2 = in_range("optimizer", "beta2", c.beta2, 0.0, 0.999999);
  c.eps = in_range("optimizer", "eps", c.eps, 0.0, 1.0);

  one_of("lr_scheduler", "name", "cosine", {"cosine"});
  c.warmup_ratio = in_range("lr_scheduler", "warmup_ratio", c.warmup_ratio, 0.0, 1.0);
  c.min_lr_ratio = in_range("lr_scheduler", "min_lr_ratio", c.min_lr_ratio, 0.0, 1.0);

  c.eval_batch_size = positive("eval", "batch_size", c.eval_batch_size);
  c.eval_max_new_tokens = positive("eval", "max_new_tokens", c.eval_max_new_tokens);
  c.eval_out_dir = r.get_string("eval", "out_dir", c.out_dir + "/eval");
  if (c.eval_out_dir.empty()) r.reject("eval", "out_dir", "must not be empty");
  c.eval_text_only = r.get_bool("eval", "text_only", c.eval_text_only);

  // [parallelism]: what can be checked without the world size or the model. The rest (the
  // product against mpirun's ranks, stages against decoder layers, the explicit partition's
  // range) is check_parallel_layout's, below.
  c.dp = positive("parallelism", "dp", c.dp);
  c.pp = positive("parallelism", "pp", c.pp);
  c.tp = positive("parallelism", "tp", c.tp);
  c.schedule = one_of("parallelism", "schedule", c.schedule, {"gpipe", "1f1b"});
  // Unset, the pipeline gets one micro-batch per stage: the fewest 1F1B accepts, so that
  // `--parallelism.pp 2` alone is a working layout.
  c.microbatches = positive("parallelism", "microbatches", c.pp);
  c.partition = r.get_string("parallelism", "partition", c.partition);
  if (c.partition != "balanced") c.partition_layers = parse_layer_list(r, c.partition);
  if (train && c.schedule == "1f1b" && c.microbatches < c.pp)
    r.reject("parallelism", "microbatches",
             "1f1b needs at least as many micro-batches as pipeline stages: got " +
                 std::to_string(c.microbatches) + " for pp " + std::to_string(c.pp) +
                 " (raise it or use schedule = \"gpipe\")");
  // [training].batch_size is the global micro-step batch: split over the dp replicas, then into the
  // pipeline's micro-batches, so the layout never changes what a step computes.
  if (train && c.batch_size % (c.dp * c.microbatches))
    r.reject("parallelism", "microbatches",
             "dp " + std::to_string(c.dp) + " x " + std::to_string(c.microbatches) +
                 " micro-batches do not divide [training].batch_size " + std::to_string(c.batch_size));
  c.bucket_mb = in_range("parallelism", "bucket_mb", c.bucket_mb, 1e-6, 1e6);
  c.timeout_s = in_range("parallelism", "timeout_s", c.timeout_s, 0.0, 1e9);
  c.backend = one_of("parallelism", "backend", c.backend, {"mpi", "nccl"});

  c.checkpoint_every = r.get_int("checkpoint", "every", c.checkpoint_every);
  if (c.checkpoint_every < 0) r.reject("checkpoint", "every", "must be >= 0 (0 = no checkpoints)");
  c.keep_latest = r.get_int("checkpoint", "keep_latest", c.keep_latest);
  if (c.keep_latest < 0) r.reject("checkpoint", "keep_latest", "must be >= 0 (0 = keep all)");
  c.checkpoint_dir = r.get_string("checkpoint", "dir", c.out_dir + "/checkpoints");
  if (c.checkpoint_dir.empty()) r.reject("checkpoint", "dir", "must not be empty");
  c.save_frozen = r.get_bool("checkpoint", "save_frozen", c.save_frozen);
  c.resume = r.get_string("checkpoint", "resume", c.resume);
  if (train && (c.checkpoint_every > 0 || !c.resume.empty()) && c.stage == "grounding")
    r.reject("checkpoint", c.resume.empty() ? "every" : "resume",
             "not supported yet: checkpoints of stage grounding (it runs in minutes; rerun it)");

  r.finish();
  return c;
}

}  // namespace

TrainConfig read_train_config(const std::string& path,
                              const std::vector<std::pair<std::string, std::string>>& overrides,
                              ConfigUse use) {
  return read_train_config_from(ConfigReader(path), path, overrides, use);
}

TrainConfig read_train_config_text(const std::string& text, const std::string& name,
                                   const std::vector<std::pair<std::string, std::string>>& overrides,
                                   ConfigUse use) {
  return read_train_config_from(ConfigReader::from_text(text, name), name, overrides, use);
}

void check_parallel_layout(const TrainConfig& c, int world_size, int n_layers) {
  const int64_t ranks = c.dp * c.pp * c.tp;
  const std::string at = c.path.empty() ? "" : c.path + ": ";
  if (ranks != world_size)
    fail(at + "[parallelism]", "dp " + std::to_string(c.dp) + " x pp " + std::to_string(c.pp) + " x tp " +
                                   std::to_string(c.tp) + " = " + std::to_string(ranks) + " ranks, but the job has " +
                                   std::to_string(world_size) + " (start it with mpirun -np " + std::to_string(ranks) +
                                   ")");
  if (c.pp > n_layers)
    fail(at + "[parallelism].pp", std::to_string(c.pp) + " pipeline stages, but the model has only " +
                                 std::to_string(n_layers) + " decoder layers (each stage needs at least one)");
  if (!c.partition_layers.empty())
    check_explicit_partition(c.partition_layers, static_cast<int>(c.pp), n_layers);
}

}  // namespace gt
