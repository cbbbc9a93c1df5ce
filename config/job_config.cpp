#include "config/job_config.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <limits>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/template_tree.hpp"
#include "layout/partition.hpp"

namespace gt {
namespace {

// The most ranks along one axis of the layout, and micro-batches: far above any cluster, and so
// that their products stay exact in 64 bits.
constexpr int64_t kMaxLayoutAxis = int64_t{1} << 20;
// What the code keeps in 32 bits (counts of nodes and classes, checkpoints kept, epochs).
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
// [data].template and [eval].template: data/chat_template.hpp's names.
const std::vector<const char*> kChatTemplates = {"vicuna_v1_1", "graphchat_v1", "chatml", "qwen2.5", "llama3",
                                                 "llama3.1"};
// Threads of one rank (OpenMP's, the data workers'): far above any machine's cores.
constexpr int64_t kMaxThreads = 4096;

// The typed reads every section shares, on top of ConfigReader's: ranges, and names of a set.
struct SectionReader {
  ConfigReader& r;

  // `v`, already read from [s].k, when it is at most `max`.
  int64_t at_most(const char* s, const char* k, int64_t v, int64_t max) {
    if (v > max) r.reject(s, k, "must be at most " + std::to_string(max) + ", got " + std::to_string(v));
    return v;
  }

  int64_t positive(const char* s, const char* k, int64_t dflt) {
    const int64_t v = r.get_int(s, k, dflt);
    if (v <= 0) r.reject(s, k, "must be positive, got " + std::to_string(v));
    return v;
  }
  double in_range(const char* s, const char* k, double dflt, double lo, double hi) {
    const double v = r.get_float(s, k, dflt);
    if (!(v >= lo && v <= hi))
      r.reject(s, k, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return v;
  }
  // One of `allowed` (a subset of the enum's names, listed in this order in the message).
  template <typename E>
  E one_of(const char* s, const char* k, E dflt, std::initializer_list<E> allowed) {
    const std::string v = r.get_string(s, k, name_of(dflt));
    std::string list;
    for (E a : allowed) {
      if (v == name_of(a)) return a;
      list += (list.empty() ? "" : ", ") + std::string(name_of(a));
    }
    r.reject(s, k, "'" + v + "' is not one of: " + list);
  }
  // One of a set of names that other libraries turn into values ([data].template), or that
  // nothing varies on yet ([optimizer].name, [lr_scheduler].name).
  std::string one_of_names(const char* s, const char* k, const std::string& dflt,
                           const std::vector<const char*>& allowed) {
    const std::string v = r.get_string(s, k, dflt);
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    r.reject(s, k, "'" + v + "' is not one of: " + list);
  }
};

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

JobSection read_job(SectionReader& in) {
  JobSection j;
  j.name = in.r.get_string("job", "name", j.name);
  if (j.name.empty()) in.r.reject("job", "name", "must not be empty");
  j.out_dir = in.r.get_string("job", "out_dir", "runs/" + j.name);
  j.overwrite = in.r.get_bool("job", "overwrite", j.overwrite);
  return j;
}

ModelSection read_model(SectionReader& in) {
  ConfigReader& r = in.r;
  ModelSection m;
  m.path = r.get_string("model", "path", m.path);
  m.tokenizer = r.get_string("model", "tokenizer", m.tokenizer);
  // A fresh model's sizes, bounded far above any real LLaMA (405B: dim 16384, 126 layers) so
  // that a damaged value (2^46 typed for 46) is refused here, before anything is built from it.
  auto model_size = [&](const char* k, int64_t dflt, int64_t max) {
    const int64_t v = in.positive("model", k, dflt);
    if (v > max) r.reject("model", k, "must be at most " + std::to_string(max) + ", got " + std::to_string(v));
    return v;
  };
  m.vocab_size = model_size("vocab_size", m.vocab_size, int64_t{1} << 24);
  m.dim = model_size("dim", m.dim, int64_t{1} << 16);
  m.n_layers = model_size("n_layers", m.n_layers, int64_t{1} << 12);
  m.n_heads = model_size("n_heads", m.n_heads, int64_t{1} << 12);
  m.n_kv_heads = model_size("n_kv_heads", m.n_kv_heads, int64_t{1} << 12);
  m.hidden_dim = model_size("hidden_dim", m.hidden_dim, int64_t{1} << 18);
  m.max_seq_len = model_size("max_seq_len", m.max_seq_len, int64_t{1} << 24);
  m.dtype = in.one_of("model", "dtype", m.dtype, {DType::kFp32, DType::kBf16});
  m.graph_encoder = r.get_string("model", "graph_encoder", m.graph_encoder);
  m.graph_encoder_prefix = r.get_string("model", "graph_encoder_prefix", m.graph_encoder_prefix);
  m.graph_encoder_type = in.one_of_names("model", "graph_encoder_type", m.graph_encoder_type, {"gt", "gcn", "llaga", "hop_field"});
  m.llaga_hops = in.positive("model", "llaga_hops", m.llaga_hops);
  m.llaga_fanout = in.positive("model", "llaga_fanout", m.llaga_fanout);
  if (template_tree_slots(m.llaga_hops, m.llaga_fanout) == 0)
    r.reject("model", "llaga_fanout",
             "LLaGA's tree of " + std::to_string(m.llaga_hops) + " hops and fanout " + std::to_string(m.llaga_fanout) +
                 " has more than " + std::to_string(kMaxTemplateSlots) + " slots (each one a graph token of every prompt)");
  m.hop_field_hops = in.positive("model", "hop_field_hops", m.hop_field_hops);
  if (m.hop_field_hops > kMaxFieldHops)
    r.reject("model", "hop_field_hops", "must be at most " + std::to_string(kMaxFieldHops) + " (each hop a graph token of every "
                                        "prompt and a feature table as wide as the graph's own), got " +
                                        std::to_string(m.hop_field_hops));
  // A setting that shapes a fresh hop_field encoder, given other than its default: refused for
  // another kind of encoder, or beside an encoder file (whose metadata says it).
  const auto shapes_fresh_field = [&](const char* key, bool given, const std::string& file_says) {
    if (given && m.graph_encoder_type != "hop_field")
      r.reject("model", key, "shapes a fresh hop_field encoder; graph_encoder_type is \"" + m.graph_encoder_type + "\"");
    else if (given && !m.graph_encoder.empty())
      r.reject("model", key, "shapes a fresh hop_field encoder; [model].graph_encoder names an encoder file already "
                             "(a hop field's file says " + file_says + ")");
  };
  m.hop_field_rows = in.one_of_names("model", "hop_field_rows", m.hop_field_rows, kFieldRows);
  shapes_fresh_field("hop_field_rows", m.hop_field_rows != "as_is", "its rows");
  m.hop_field_projector = in.one_of_names("model", "hop_field_projector", m.hop_field_projector, kFieldProjectors);
  shapes_fresh_field("hop_field_projector", m.hop_field_projector != "shared", "how its projector reads it");
  m.hop_field_base = r.get_string("model", "hop_field_base", m.hop_field_base);
  if (!m.hop_field_base.empty() && m.graph_encoder_type != "hop_field")
    r.reject("model", "hop_field_base", "is the base of a fresh hop_field encoder; graph_encoder_type is \"" +
                                            m.graph_encoder_type + "\"");
  else if (!m.hop_field_base.empty() && !m.graph_encoder.empty())
    r.reject("model", "hop_field_base", "is the base of a fresh hop_field encoder; [model].graph_encoder names an encoder "
                                        "file already (a hop field's file holds its base)");
  m.projector = r.get_string("model", "projector", m.projector);
  m.adapter = r.get_string("model", "adapter", m.adapter);
  m.encoder_dropout = r.get_float("model", "encoder_dropout", m.encoder_dropout);
  if (!(m.encoder_dropout >= 0.0 && m.encoder_dropout < 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", m.encoder_dropout);
    r.reject("model", "encoder_dropout", std::string("must be in [0, 1) (0 = no dropout), got ") + got);
  }
  if (m.dim % m.n_heads) r.reject("model", "n_heads", "must divide dim (" + std::to_string(m.dim) + ")");
  if (m.n_heads % m.n_kv_heads)
    r.reject("model", "n_kv_heads", "must divide n_heads (" + std::to_string(m.n_heads) + ")");
  if ((m.dim / m.n_heads) % 2) r.reject("model", "n_heads", "head size dim/n_heads must be even for rotary embeddings");
  return m;
}

DataSection read_data(SectionReader& in) {
  ConfigReader& r = in.r;
  DataSection d;
  d.source = r.get_string("data", "source", d.source);
  d.seed = r.get_int("data", "seed", d.seed);
  d.nodes = in.at_most("data", "nodes", in.positive("data", "nodes", d.nodes), kMaxInt32);
  d.classes = in.at_most("data", "classes", in.positive("data", "classes", d.classes), kMaxInt32);
  d.noise = in.in_range("data", "noise", d.noise, 0.0, 1.0);
  d.instructions = r.get_string("data", "instructions", d.instructions);
  d.graph = r.get_string("data", "graph", d.graph);
  d.features = r.get_string("data", "features", d.features);
  d.max_len = in.positive("data", "max_len", d.max_len);
  d.chat_template = in.one_of_names("data", "template", d.chat_template, kChatTemplates);
  d.num_workers = r.get_int("data", "num_workers", d.num_workers);
  d.skip_invalid = r.get_bool("data", "skip_invalid", d.skip_invalid);
  d.group_by_length = r.get_bool("data", "group_by_length", d.group_by_length);
  if (d.num_workers < 0) r.reject("data", "num_workers", "must be >= 0 (0 = prepare batches in the training thread)");
  in.at_most("data", "num_workers", d.num_workers, kMaxThreads);
  return d;
}

// What the phase needs of the other sections is checked here, where the phase is read.
TrainingSection read_training(SectionReader& in, const ModelSection& model, const DataSection& data, bool train) {
  ConfigReader& r = in.r;
  TrainingSection t;
  t.stage = in.one_of("training", "stage", t.stage,
                      {Phase::kLm, Phase::kGrounding, Phase::kGraphMatching, Phase::kTask});
  const bool graph = is_graph_phase(t.stage);
  const std::string stage = name_of(t.stage);
  if (train) {
    if (graph && data.instructions.empty())
      r.reject("data", "instructions", "stage '" + stage + "' needs GraphGPT instruction records (graphtune data build)");
    if (graph && model.path.empty())
      r.reject("model", "path", "stage '" + stage + "' tunes graph tokens into an existing LLM: name it");
  } else {
    if (data.instructions.empty())
      r.reject("data", "instructions", "eval needs GraphGPT instruction records to answer (graphtune data build --split test)");
    if (model.path.empty()) r.reject("model", "path", "eval runs GraphGPT on an existing LLM: name it");
  }
  if (model.tokenizer == "train" && t.stage != Phase::kLm)
    r.reject("model", "tokenizer", "\"train\" (a new vocabulary) is for stage 'lm' only; name the model's tokenizer or \"auto\"");
  t.epochs = r.get_int("training", "epochs", t.epochs);
  if (train && t.epochs < 0) r.reject("training", "epochs", "must be >= 0");
  in.at_most("training", "epochs", t.epochs, kMaxInt32);
  t.steps = r.get_int("training", "steps", graph ? 0 : t.steps);
  if (train && (t.steps < 0 || (t.steps == 0 && (!graph || t.epochs == 0))))
    r.reject("training", "steps", "must be positive (or 0 with [training].epochs set, for GraphGPT stages)");
  t.trainable = in.one_of("training", "trainable", t.trainable,
                          {Trainable::kGraphGpt, Trainable::kGraphGptEncoder, Trainable::kProjector,
                           Trainable::kProjectorLora, Trainable::kProjectorLoraEncoder});
  t.batch_size = in.positive("training", "batch_size", t.batch_size);
  t.seq_len = in.positive("training", "seq_len", t.seq_len);
  t.grad_accum_steps = in.positive("training", "grad_accum_steps", t.grad_accum_steps);
  t.seed = r.get_int("training", "seed", t.seed);
  t.max_grad_norm = in.in_range("training", "max_grad_norm", t.max_grad_norm, 0.0, 1e9);
  t.log_every = in.positive("training", "log_every", t.log_every);
  t.threads = r.get_int("training", "threads", t.threads);
  t.activation_checkpointing = r.get_bool("training", "activation_checkpointing", t.activation_checkpointing);
  t.packing = r.get_bool("training", "packing", t.packing);
  t.share_prefix = r.get_bool("training", "share_prefix", t.share_prefix);
  if (t.threads < 0) r.reject("training", "threads", "must be >= 0 (0 = all cores)");
  in.at_most("training", "threads", t.threads, kMaxThreads);
  t.on_nonfinite =
      in.one_of("training", "on_nonfinite", t.on_nonfinite, {NonFinitePolicy::kSkipStep, NonFinitePolicy::kAbort});
  t.max_skipped_in_a_row = in.positive("training", "max_skipped_in_a_row", t.max_skipped_in_a_row);
  t.device = in.one_of("training", "device", t.device, {DeviceKind::kAuto, DeviceKind::kCpu, DeviceKind::kCuda});
  t.tf32 = r.get_bool("training", "tf32", t.tf32);
  t.deterministic = r.get_bool("training", "deterministic", t.deterministic);
  return t;
}

OptimizerSection read_optimizer(SectionReader& in) {
  OptimizerSection o;
  in.one_of_names("optimizer", "name", "adamw", {"adamw"});
  o.lr = in.in_range("optimizer", "lr", o.lr, 0.0, 10.0);
  o.weight_decay = in.in_range("optimizer", "weight_decay", o.weight_decay, 0.0, 10.0);
  o.beta1 = in.in_range("optimizer", "beta1", o.beta1, 0.0, 0.999999);
  o.beta2 = in.in_range("optimizer", "beta2", o.beta2, 0.0, 0.999999);
  o.eps = in.in_range("optimizer", "eps", o.eps, 0.0, 1.0);
  o.encoder_lr = in.in_range("optimizer", "encoder_lr", o.lr, 0.0, 10.0);
  o.encoder_weight_decay = in.in_range("optimizer", "encoder_weight_decay", o.weight_decay, 0.0, 10.0);
  return o;
}

LrSchedulerSection read_lr_scheduler(SectionReader& in) {
  LrSchedulerSection l;
  in.one_of_names("lr_scheduler", "name", "cosine", {"cosine"});
  l.warmup_ratio = in.in_range("lr_scheduler", "warmup_ratio", l.warmup_ratio, 0.0, 1.0);
  l.min_lr_ratio = in.in_range("lr_scheduler", "min_lr_ratio", l.min_lr_ratio, 0.0, 1.0);
  return l;
}

LoraSection read_lora(SectionReader& in) {
  ConfigReader& r = in.r;
  LoraSection l;
  l.rank = in.at_most("lora", "rank", in.positive("lora", "rank", l.rank), 4096);
  l.alpha = in.in_range("lora", "alpha", l.alpha, 1e-6, 1e6);
  std::string joined;
  for (const auto& t : l.targets) joined += (joined.empty() ? "" : ",") + t;
  const std::string text = r.get_string("lora", "targets", joined);
  l.targets.clear();
  static const std::vector<std::string> known = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string t = text.substr(pos, comma - pos);
    t.erase(0, t.find_first_not_of(' '));
    t.erase(t.find_last_not_of(' ') + 1);
    if (std::find(known.begin(), known.end(), t) == known.end())
      r.reject("lora", "targets", "'" + t + "' is not one of: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
    if (std::find(l.targets.begin(), l.targets.end(), t) != l.targets.end())
      r.reject("lora", "targets", "'" + t + "' is named twice");
    l.targets.push_back(t);
    pos = comma + 1;
  }
  return l;
}

// The protocol sets the defaults of the keys it is about; a key given still wins, so that one
// of GraphGPT's settings can be varied at a time.
EvalSection read_eval(SectionReader& in, const JobSection& job, const DataSection& data, const TrainingSection& training) {
  ConfigReader& r = in.r;
  EvalSection e;
  e.protocol = in.one_of("eval", "protocol", e.protocol, {EvalProtocol::kGraphtune, EvalProtocol::kGraphGpt});
  const bool graphgpt = e.protocol == EvalProtocol::kGraphGpt;
  e.batch_size = in.positive("eval", "batch_size", e.batch_size);
  e.max_new_tokens = r.get_int("eval", "max_new_tokens", graphgpt ? 1024 : 0);
  if (e.max_new_tokens < 0)
    r.reject("eval", "max_new_tokens", "must be >= 0 (0 = enough for the records' own answers), got " +
                                           std::to_string(e.max_new_tokens));
  in.at_most("eval", "max_new_tokens", e.max_new_tokens, kMaxInt32);
  e.temperature = in.in_range("eval", "temperature", graphgpt ? 0.2 : 0.0, 0.0, 100.0);
  e.top_p = in.in_range("eval", "top_p", e.top_p, 0.0, 1.0);
  e.seed = r.get_int("eval", "seed", training.seed);
  e.chat_template =
      in.one_of_names("eval", "template", graphgpt ? "graphchat_v1" : data.chat_template, kChatTemplates);
  e.classes = r.get_string("eval", "classes", e.classes);
  e.out_dir = r.get_string("eval", "out_dir", job.out_dir + "/eval");
  if (e.out_dir.empty()) r.reject("eval", "out_dir", "must not be empty");
  e.text_only = r.get_bool("eval", "text_only", e.text_only);
  e.answers = in.one_of_names("eval", "answers", e.answers, {"free", "choices"});
  e.resume = r.get_bool("eval", "resume", e.resume);
  e.overwrite = r.get_bool("eval", "overwrite", e.overwrite);
  e.in_flight = r.get_int("eval", "in_flight", e.in_flight);
  e.prefix_cache = r.get_bool("eval", "prefix_cache", e.prefix_cache);
  if (e.in_flight < 0 || e.in_flight > 64)
    r.reject("eval", "in_flight", "must be in [0, 64] (0 = one more than the pipeline stages), got " + std::to_string(e.in_flight));
  return e;
}

// Each key alone. The layout as a whole (its ranks against mpirun's, its stages against the
// model's layers, its micro-batches against the schedule and the batch) is
// check_parallel_layout's, below, so that the most basic of several problems is the one named.
ParallelismSection read_parallelism(SectionReader& in) {
  ConfigReader& r = in.r;
  ParallelismSection p;
  // Bounded far above any cluster, so that dp x pp x tp x microbatches stays exact in 64 bits.
  p.dp = in.at_most("parallelism", "dp", in.positive("parallelism", "dp", p.dp), kMaxLayoutAxis);
  p.pp = in.at_most("parallelism", "pp", in.positive("parallelism", "pp", p.pp), kMaxLayoutAxis);
  p.tp = in.at_most("parallelism", "tp", in.positive("parallelism", "tp", p.tp), kMaxLayoutAxis);
  p.schedule = in.one_of("parallelism", "schedule", p.schedule, {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB});
  // Unset, the pipeline gets one micro-batch per stage: the fewest 1F1B accepts, so that
  // `--parallelism.pp 2` alone is a working layout.
  p.microbatches =
      in.at_most("parallelism", "microbatches", in.positive("parallelism", "microbatches", p.pp), kMaxLayoutAxis);
  p.balance_microbatches = r.get_bool("parallelism", "balance_microbatches", p.balance_microbatches);
  const std::string partition = r.get_string("parallelism", "partition", "balanced");
  if (partition != "balanced") p.partition = parse_layer_list(r, partition);
  p.bucket_mb = in.in_range("parallelism", "bucket_mb", p.bucket_mb, 1e-6, 1e6);
  p.timeout_s = in.in_range("parallelism", "timeout_s", p.timeout_s, 0.0, 1e9);
  p.backend_given = !r.get_string("parallelism", "backend", "").empty();
  p.backend = in.one_of("parallelism", "backend", p.backend, {Backend::kMpi, Backend::kNccl});
  return p;
}

CheckpointSection read_checkpoint(SectionReader& in, const JobSection& job, const TrainingSection& training, bool train) {
  ConfigReader& r = in.r;
  CheckpointSection c;
  c.every = r.get_int("checkpoint", "every", c.every);
  if (c.every < 0) r.reject("checkpoint", "every", "must be >= 0 (0 = no checkpoints)");
  c.keep_latest = r.get_int("checkpoint", "keep_latest", c.keep_latest);
  if (c.keep_latest < 0) r.reject("checkpoint", "keep_latest", "must be >= 0 (0 = keep all)");
  in.at_most("checkpoint", "keep_latest", c.keep_latest, kMaxInt32);
  c.dir = r.get_string("checkpoint", "dir", job.out_dir + "/checkpoints");
  if (c.dir.empty()) r.reject("checkpoint", "dir", "must not be empty");
  c.save_frozen = r.get_bool("checkpoint", "save_frozen", c.save_frozen);
  c.resume = r.get_string("checkpoint", "resume", c.resume);
  if (train && (c.every > 0 || !c.resume.empty()) && training.stage == Phase::kGrounding)
    r.reject("checkpoint", c.resume.empty() ? "every" : "resume",
             "not supported yet: checkpoints of stage grounding (it runs in minutes; rerun it)");
  return c;
}

// The whole reading and validation, on the reader of a file or of text, section by section in
// the order their keys are checked.
JobConfig read_from(ConfigReader r, const std::string& file,
                    const std::vector<std::pair<std::string, std::string>>& overrides, ConfigUse use) {
  const bool train = use == ConfigUse::kTrain;
  for (const auto& [k, v] : overrides) r.apply_override(k, v);
  SectionReader in{r};
  JobConfig c;
  c.file = file;
  c.job = read_job(in);
  c.model = read_model(in);
  c.data = read_data(in);
  c.training = read_training(in, c.model, c.data, train);
  c.optimizer = read_optimizer(in);
  c.lr_scheduler = read_lr_scheduler(in);
  c.lora = read_lora(in);
  c.eval = read_eval(in, c.job, c.data, c.training);
  c.parallelism = read_parallelism(in);
  // The backend follows the device; a device that auto resolves is the worker's to pair.
  ParallelismSection& p = c.parallelism;
  if (c.training.device == DeviceKind::kCpu && p.backend_given && p.backend == Backend::kNccl)
    r.reject("parallelism", "backend", "nccl moves CUDA tensors, but [training].device is cpu (use mpi, or device cuda)");
  if (c.training.device == DeviceKind::kCuda && !p.backend_given) p.backend = Backend::kNccl;
  c.checkpoint = read_checkpoint(in, c.job, c.training, train);
  r.finish();
  c.overridden = r.overridden();
  return c;
}

}  // namespace

std::string JobConfig::where(const std::string& section, const std::string& key) const {
  return (file.empty() ? std::string("config") : file) + ": [" + section + "]" + (key.empty() ? "" : "." + key);
}

std::string JobConfig::origin(const std::string& section, const std::string& key) const {
  if (overridden.count(section + "." + key)) return "command line --" + section + "." + key;
  return where(section, key);
}

JobConfig read_job_config(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
                          ConfigUse use) {
  return read_from(ConfigReader(path), path, overrides, use);
}

JobConfig read_job_config_text(const std::string& text, const std::string& name,
                               const std::vector<std::pair<std::string, std::string>>& overrides, ConfigUse use) {
  return read_from(ConfigReader::from_text(text, name), name, overrides, use);
}

void check_parallel_layout(const JobConfig& c, int world_size, int n_layers, ConfigUse use) {
  const ParallelismSection& p = c.parallelism;
  const int64_t ranks = p.dp * p.pp * p.tp;
  const std::string at = c.file.empty() ? "" : c.file + ": ";
  if (ranks != world_size)
    fail(at + "[parallelism]", "dp " + std::to_string(p.dp) + " x pp " + std::to_string(p.pp) + " x tp " +
                                   std::to_string(p.tp) + " = " + std::to_string(ranks) + " ranks, but the job has " +
                                   std::to_string(world_size) + " (start it with mpirun -np " + std::to_string(ranks) +
                                   ")");
  if (p.pp > n_layers)
    fail(at + "[parallelism].pp", std::to_string(p.pp) + " pipeline stages, but the model has only " +
                                      std::to_string(n_layers) + " decoder layers (each stage needs at least one)");
  if (!p.partition.empty()) check_explicit_partition(p.partition, static_cast<int>(p.pp), n_layers);
  if (use == ConfigUse::kEval) return;
  if (p.microbatches < min_microbatches(p.schedule, static_cast<int>(p.pp)))
    fail(c.origin("parallelism", "microbatches"),
         std::string(name_of(p.schedule)) + " needs at least as many micro-batches as pipeline stages: got " +
             std::to_string(p.microbatches) + " for pp " + std::to_string(p.pp) +
             " (raise it or use schedule = \"gpipe\")");
  // [training].batch_size is the global micro-step batch: split over the dp replicas, then into the
  // pipeline's micro-batches, so the layout never changes what a step computes.
  const int64_t batch = c.training.batch_size;
  if (batch % (p.dp * p.microbatches))
    fail(c.origin("parallelism", "microbatches"),
         "dp " + std::to_string(p.dp) + " x " + std::to_string(p.microbatches) +
             " micro-batches do not divide [training].batch_size " + std::to_string(batch));
}

}  // namespace gt
