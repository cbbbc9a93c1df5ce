#include "launcher/memory_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "common/error.hpp"
#include "common/fs.hpp"
#include "formats/model_config.hpp"
#include "formats/model_presets.hpp"
#include "layout/partition.hpp"
#include "layout/schedule_sim.hpp"

namespace gt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
// --gpus bounds: far above any job, so that sizes and counts stay exact.
constexpr long kMaxGpus = 65536;
constexpr double kMaxGpuGiB = 1 << 20;

// --- Calibration (CPU), measured once on the 2-core build machine, OMP_NUM_THREADS=1, with the
// worker's own "peak RSS" line (getrusage ru_maxrss), see docs/plan.md:
// * Baseline: `graphtune-worker train` on configs/lm.toml shrunk to dim 64, 1 layer, batch 1,
//   seq 32 (live tensors < 1 MiB): 376 MiB in one process (libtorch's pages, the embedded
//   corpus and its tokens); under `mpirun -np 2` each rank also maps MPI's shared-memory
//   transport: measured 383 MiB per rank (dp 2).
constexpr double kCpuBaselineOneMiB = 376, kCpuBaselineMpiMiB = 383;
// * Retention: with MALLOC_MMAP_THRESHOLD_=131072 (glibc's threshold fixed: every large tensor
//   mmapped, given back on free) phase lm at dim 512, 8 layers, 8 heads / 4 kv heads, hidden
//   1376, seq 256, batch 8 peaked at 1344 MiB, and at 838 MiB with activation checkpointing;
//   the live-tensor model below (plus the baseline) says 1345 and 792: the byte counts hold.
//   With glibc's default, its mmap threshold rises to the largest block freed (up to 32 MiB)
//   after the first step; the activations then live in the heap, which keeps what a step's
//   forward fragmented. The same job peaked at 1757 and 1793 MiB (two runs): 412 and 448 MiB
//   above the model, 0.62 and 0.67 of the step's activation working set (the non-checkpointed
//   saved tensors of the micro-batches in flight, 669 MiB here; checkpointing or not, the
//   forward allocates them layer after layer). One constant, their mean, for every case:
constexpr double kCpuRetention = 0.65;
// Blocks above glibc's largest dynamic mmap threshold are always mmapped and given back.
constexpr double kGlibcMaxMmapThreshold = 32 * kMiB;

// --- GPU terms. Estimates, each marked as one in the output, until a lent GPU measures them
// (scripts/device/gpu_check.sh measures the first two):
// * the CUDA context with libtorch's kernels (CUDA 12+ loads modules lazily);
constexpr double kCudaContext = 0.5 * kGiB;
// * the cuBLAS and cuBLASLt workspaces the first matmuls allocate beside the caching allocator;
constexpr double kCublasWorkspace = 0.125 * kGiB;
// * NCCL's buffers for each communicator a rank shares with peers: 4 MiB (NCCL_BUFFSIZE) per
//   channel and direction, up to 16 channels between two PCIe GPUs, plus its proxy state;
constexpr double kNcclPerCommunicator = 0.25 * kGiB;
// * the caching allocator's fragmentation, as a share of the activations (a rule of thumb).
constexpr double kCudaFragmentation = 0.10;
// What a plan keeps free on every GPU: room for the estimates above to be low, for a batch's
// spike past the planned sequence length, and for another process's context.
constexpr double kSafetyShare = 0.10;

// GraphGPT's graph transformer at width 128: W_P, 3 layers of q/k/v + LayerNorm, inverW_P. Its
// GCN ([model].graph_encoder_type = "gcn") is smaller at the same widths; this bounds it.
int64_t graph_encoder_params(int64_t w) { return (w * w + w) + 3 * (3 * w * w + 2 * w) + (w * w + w); }

struct Sizes {
  double act;       // bytes of an activation element (matmul outputs)
  double residual;  // bytes of the residual stream (layer inputs, pipeline messages)
};

int64_t vocab_of(const PlanJob& job) {
  // The graph phases add <g_patch>, <g_start>, <g_end> to the vocabulary.
  return job.model.vocab_size + (is_graph_phase(job.stage) ? 3 : 0);
}

// Bytes autograd keeps per token of one decoder layer (model/llama.cpp's layer(), read op by
// op; D = dim, H = hidden, h = heads). SDPA on CPU and CUDA is a flash kernel: it keeps q, k, v,
// its output and one log-sum-exp per head, never the T x T scores.
//   trained weights, fp32: x, rms-normed, scaled (norm 1); q, k, v (k, v repeated to h heads),
//     attention output; residual, normed, scaled (norm 2); gate, silu, up, product = 10 D + 4 H
//   trained, bf16 autocast: the fp32 ones stay fp32 (x, normed x2, residual), the matmul
//     inputs/outputs are bf16 = 28 D + 8 H bytes
//   frozen weights (GraphGPT's LLM), fp32: linears keep only their weight, norms with frozen
//     scales keep their input only: x, q, k, v, attention output, residual, gate, silu, up
//     = 6 D + 3 H
//   frozen, bf16 (weights stored bf16): the norms' fp32 copies of x and the residual, the
//     rest bf16 = 16 D + 6 H bytes
double layer_bytes_per_token(const PlanJob& job) {
  const double D = static_cast<double>(job.model.dim), H = static_cast<double>(job.model.hidden_dim);
  const double lse = 4.0 * static_cast<double>(job.model.n_heads);
  const bool frozen = is_graph_phase(job.stage);
  if (!frozen) return (job.bf16 ? 28 * D + 8 * H : 40 * D + 16 * H) + lse;
  return (job.bf16 ? 16 * D + 6 * H : 24 * D + 12 * H) + lse;
}

Sizes sizes_of(const PlanJob& job) {
  // The lm phase embeds from fp32 master weights; the graph phases from the bf16 frozen table.
  return {job.bf16 ? 2.0 : 4.0, (job.bf16 && is_graph_phase(job.stage)) ? 2.0 : 4.0};
}

struct StageParams {
  std::vector<int> first;  // first layer of each stage
  int64_t first_extra = 0, last_extra = 0;
};

StageParams partition_of(const PlanJob& job, int pp) {
  const ModelShape& m = job.model;
  const int64_t V = vocab_of(job), D = m.dim;
  StageParams s;
  s.first_extra = V * D;
  s.last_extra = D + V * D;  // final norm + head (a copy of the table when tied)
  if (is_graph_phase(job.stage))
    s.first_extra += graph_encoder_params(job.graph_hidden) + job.graph_hidden * D + D;
  std::vector<int64_t> layers(static_cast<size_t>(m.n_layers), m.layer_params());
  s.first = balanced_partition(layers, pp, s.first_extra, s.last_extra);
  return s;
}


}  // namespace

int64_t ModelShape::layer_params() const {
  const int64_t kv = n_kv_heads * (dim / n_heads);
  return 2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * dim * hidden_dim;
}

int64_t lora_layer_params(const ModelShape& m, int64_t rank, const std::vector<std::string>& targets) {
  const int64_t kv = m.n_kv_heads * (m.dim / m.n_heads);
  int64_t n = 0;
  for (const auto& t : targets) {
    if (t == "q_proj" || t == "o_proj") n += rank * (m.dim + m.dim);
    else if (t == "k_proj" || t == "v_proj") n += rank * (m.dim + kv);
    else n += rank * (m.dim + m.hidden_dim);  // gate_proj, up_proj, down_proj
  }
  return n;
}

int64_t ModelShape::total_params() const {
  return vocab_size * dim * (tied ? 1 : 2) + n_layers * layer_params() + dim;
}

ModelShape model_shape(const std::string& name, const LlamaConfig& c) {
  ModelShape m;
  m.name = name;
  m.dim = c.dim, m.n_layers = c.n_layers, m.n_heads = c.n_heads, m.n_kv_heads = c.n_kv_heads;
  m.hidden_dim = c.hidden_dim, m.vocab_size = c.vocab_size, m.tied = c.tie_embeddings;
  return m;
}

ModelShape model_preset(const std::string& name) {
  if (const std::optional<LlamaConfig> c = known_model_shape(name)) return model_shape(name, *c);
  std::string list;
  for (const auto& n : known_model_shape_names()) list += (list.empty() ? "" : ", ") + n;
  fail("--model", "unknown preset '" + name + "' (presets: " + list +
                      "; or a Hugging Face folder, llama2.c .bin or GGUF file)");
}

ModelShape resolve_model(const std::string& spec) {
  if (known_model_shape(spec)) return model_preset(spec);
  if (!path_exists(resolve_model_path(spec, "--model"))) model_preset(spec);  // fails, listing the presets
  return model_shape(spec, read_model_config(spec));
}

Devices parse_gpus(const std::string& spec) {
  const std::string where = "--gpus " + spec;
  const auto x = spec.find('x');
  if (x == std::string::npos || x == 0 || x + 1 >= spec.size())
    fail(where, "expected COUNTxSIZE, e.g. 2x24GB");
  Devices d;
  // Plain digits for the count, a plain decimal for the size: "2.5x", "+2x", "1e400GB" and
  // overflow are each named with the range they fall outside.
  const std::string count = spec.substr(0, x);
  const bool digits = count.size() <= 9 && count.find_first_not_of("0123456789") == std::string::npos;
  const long n = digits ? std::stol(count) : -1;
  if (!digits || n < 1 || n > kMaxGpus)
    fail(where, "expected COUNTxSIZE: the GPU count must be a positive integer from 1 to " + std::to_string(kMaxGpus) +
                    ", got '" + count + "'");
  d.count = static_cast<int>(n);
  std::string size = spec.substr(x + 1);
  double unit = kGiB;  // GB is read as GiB, as nvidia-smi's "24GB" cards hold 24 GiB
  for (const char* suffix : {"GiB", "GB", "G"})
    if (ends_with(size, suffix)) {
      size.resize(size.size() - std::string(suffix).size());
      break;
    }
  double v = -1;
  try {
    size_t used = 0;
    v = std::stod(size, &used);
    if (used != size.size()) v = -1;
  } catch (const std::logic_error&) {  // stod: no number at all, or beyond a double
    v = -1;
  }
  if (!(v > 0) || !(v <= kMaxGpuGiB))
    fail(where, "the memory per GPU must be positive, at most " + std::to_string(static_cast<long long>(kMaxGpuGiB)) +
                    " GiB, e.g. 24GB; got '" + spec.substr(x + 1) + "'");
  d.bytes_each = v * unit;
  return d;
}

Phase plan_stage(const std::string& name) {
  const std::optional<Phase> p = value_named<Phase>(name);
  if (!p || (*p != Phase::kLm && !is_graph_phase(*p)))
    fail("--stage", "unknown stage '" + name + "' (the planner knows lm, graph_matching, task)");
  return *p;
}

void check_plan_job(const PlanJob& job) {
  if (job.stage != Phase::kLm && !is_graph_phase(job.stage))
    fail("--stage", "unknown stage '" + std::string(name_of(job.stage)) + "' (the planner knows lm, graph_matching, task)");
  if (job.seq < 1 || job.micro_batch < 1 || job.microbatches < 1)
    fail("plan", "--seq, --micro-batch and --microbatches must be positive");
}

PlanJob job_at(const PlanJob& job, const Layout& layout) {
  if (job.global_batch < 1) return job;
  PlanJob j = job;
  j.microbatches = std::max<int64_t>(job.microbatches, min_microbatches(job.schedule, layout.pp));
  j.micro_batch = std::max<int64_t>(1, job.global_batch / (layout.dp * j.microbatches));
  return j;
}

std::vector<Layout> layouts_for(int n, const PlanJob& job) {
  std::vector<Layout> out;
  const bool tp_ok = is_graph_phase(job.stage);
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp || (tp > 1 && !tp_ok)) continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp || pp > job.model.n_layers) continue;
      const Layout l{n / tp / pp, pp, tp};
      if (job.global_batch > 0 && job.global_batch % (l.dp * job_at(job, l).microbatches)) continue;
      out.push_back(l);
    }
  }
  return out;
}

double safety_margin_bytes(const Devices& devices) { return devices.cpu ? 0.0 : kSafetyShare * devices.bytes_each; }

double cpu_baseline_bytes(int ranks) { return (ranks > 1 ? kCpuBaselineMpiMiB : kCpuBaselineOneMiB) * kMiB; }

LayoutPlan plan_layout(const PlanJob& asked, const Devices& devices, const Layout& layout) {
  const PlanJob job = job_at(asked, layout);
  check_plan_job(job);
  const ModelShape& m = job.model;
  const int64_t V = vocab_of(job), D = m.dim;
  const bool graph = is_graph_phase(job.stage);
  const Sizes sz = sizes_of(job);
  const StageParams part = partition_of(job, layout.pp);
  const double tokens = static_cast<double>(job.micro_batch * job.seq);  // one micro-batch
  const double per_layer = layer_bytes_per_token(job) * tokens;
  // The attention mask SDPA turns into the activations' dtype and keeps: [1, 1, T, T] in stage
  // lm, [B, 1, T, T] with the graph phases' padding mask.
  const double mask = static_cast<double>(job.seq) * job.seq * sz.act * (graph ? job.micro_batch : 1);
  const double T = static_cast<double>(job.seq);
  const double learned = graph ? tokens : job.micro_batch * (T - 1);  // head positions (graph: upper bound)
  // A pipeline runs at least the micro-batches its schedule needs (the worker refuses fewer), and
  // each stage holds what the simulator counts in flight under that schedule.
  const int64_t microbatches = std::max<int64_t>(job.microbatches, min_microbatches(job.schedule, layout.pp));
  const std::vector<int> in_flight = in_flight_per_stage(job.schedule, layout.pp, static_cast<int>(microbatches));

  LayoutPlan plan;
  plan.layout = layout;
  const int world = layout.dp * layout.pp * layout.tp;
  for (int s = 0; s < layout.pp; ++s) {
    RankMemory r;
    r.stage = s;
    r.first_layer = part.first[static_cast<size_t>(s)];
    r.last_layer = s + 1 < layout.pp ? part.first[static_cast<size_t>(s) + 1] : m.n_layers;
    const bool first = s == 0, last = s + 1 == layout.pp;
    const double layers = static_cast<double>(r.last_layer - r.first_layer);
    r.in_flight = in_flight[static_cast<size_t>(s)];

    // Parameters this rank holds: its layers, the table on stage 0, norm + head on the last
    // (a tied table is one tensor when both ends are one rank).
    double held = layers * static_cast<double>(m.layer_params());
    if (first) held += static_cast<double>(V * D);
    if (last) held += D + ((m.tied && first) ? 0.0 : static_cast<double>(V * D));
    int64_t trainable = 0;
    if (graph) {
      const int64_t proj = (job.graph_hidden * D + D) / layout.tp;
      const bool rows = job.trainable == Trainable::kGraphGpt || job.trainable == Trainable::kGraphGptEncoder;
      const bool encoder = job.trainable == Trainable::kGraphGptEncoder || job.trainable == Trainable::kProjectorLoraEncoder;
      if (first) trainable = proj + (rows ? 2 * D : 0) + (encoder ? graph_encoder_params(job.graph_hidden) : 0);
      // Each stage trains its layers' adapters (fp32, on top of the frozen weights).
      if (job.trainable == Trainable::kProjectorLora || job.trainable == Trainable::kProjectorLoraEncoder) trainable += (r.last_layer - r.first_layer) * job.lora_per_layer;
      const double frozen_bytes = job.bf16 ? 2.0 : 4.0;
      r.weights = held * frozen_bytes + 4.0 * static_cast<double>(trainable);
      if (first && !encoder) r.weights += frozen_bytes * static_cast<double>(graph_encoder_params(job.graph_hidden));
    } else {
      trainable = static_cast<int64_t>(held);
      r.weights = 4.0 * held;
      // Autocast's bf16 cast of each trained matrix is kept by autograd until backward.
      if (job.bf16) r.autocast_copies = 2.0 * held;
    }
    r.trainable_params = trainable;
    r.optimizer = 8.0 * static_cast<double>(trainable);  // exp_avg + exp_avg_sq, fp32
    r.grads = 4.0 * static_cast<double>(trainable);

    // Activations: the micro-batches in flight, each with its layers' saved tensors; the head
    // (norm, fp32 logits' log-softmax, its gradient and the logits' gradient) on the last stage;
    // one layer's backward working set (gradients of its widest tensors) at a time.
    const double head =
        last ? learned * (3.0 * D * 4.0 + 3.0 * static_cast<double>(V) * 4.0) : 0.0;
    const double backward_work = tokens * (D + m.hidden_dim) * 4.0;
    const double mb_full = layers * (per_layer + mask);
    // Checkpointed: each layer keeps its input; the one being recomputed holds its whole set.
    r.activations_full = r.in_flight * mb_full + head + backward_work;
    r.activations_ckpt = r.in_flight * layers * tokens * D * sz.residual + (layers > 0 ? per_layer + mask : 0.0) +
                         head + backward_work;
    r.activations = job.checkpointing ? r.activations_ckpt : r.activations_full;

    // Communication: dp sums gradients in flat buckets covering every trainable (kept for the
    // run); a pipeline stage holds each in-flight micro-batch's received input and its output
    // (until the gradient for it is back), plus one gradient in transit.
    const double msg = tokens * D * sz.residual;
    if (layout.dp > 1) r.comm += 4.0 * static_cast<double>(trainable);
    if (layout.pp > 1) r.comm += r.in_flight * msg * ((first ? 0 : 1) + (last ? 0 : 1)) + msg;
    if (layout.tp > 1 && first) r.comm += 2.0 * tokens * D * 4.0;  // the projector's gathered output

    if (devices.cpu) {
      r.overhead = cpu_baseline_bytes(world);
      // Blocks larger than glibc's mmap ceiling are always returned; the rest is retained.
      const double per_tensor = tokens * std::max<double>(D, m.hidden_dim) * sz.act;
      const double retained = per_tensor > kGlibcMaxMmapThreshold ? 0.0 : kCpuRetention;
      r.allocator = retained * r.in_flight * mb_full;
    } else {
      r.overhead = kCudaContext + kCublasWorkspace;
      // The world, and each of dp, pp and tp that has more than one rank.
      const int communicators = (world > 1) + (layout.dp > 1) + (layout.pp > 1) + (layout.tp > 1);
      r.nccl = communicators * kNcclPerCommunicator;
      r.allocator = kCudaFragmentation * r.activations;
    }
    // Building. Read from a file, a rank reads its stage's weights alone, each straight into its
    // storage dtype, and gives each tensor's file pages back once copied: its weights plus the
    // largest tensor's pages (counted at the storage dtype's size: the usual bf16 file of a
    // bf16 run). Fresh, the model is drawn whole in fp32 and then cut, so that every layout
    // starts from the same weights.
    const double whole = 4.0 * static_cast<double>(m.total_params() + (V - m.vocab_size) * D);
    const bool loads = graph || job.weights_from_file;
    const double stored = graph ? (job.bf16 ? 2.0 : 4.0) : 4.0;  // bytes a held weight is kept in
    const double largest = static_cast<double>(std::max<int64_t>(V, m.hidden_dim) * D);
    const double building = loads ? r.weights + stored * largest : whole;
    r.host_ram = cpu_baseline_bytes(world) + building;
    r.setup_peak = devices.cpu ? r.overhead + building : 0.0;  // GPU: built in host memory
    const double training = r.weights + r.autocast_copies + std::max(r.activations, r.grads) + r.optimizer + r.comm +
                            r.overhead + r.nccl + r.allocator;
    r.total = std::max(training, r.setup_peak);
    plan.peak = std::max(plan.peak, r.total);
    plan.host_ram = std::max(plan.host_ram, r.host_ram);
    // Per step: dp all-reduce of the gradients (2x their bytes, ring), pp activations forward
    // and gradients back for every micro-batch.
    double step_comm = 0;
    if (layout.dp > 1) step_comm += 2.0 * 4.0 * static_cast<double>(trainable);
    if (layout.pp > 1) step_comm += microbatches * msg * ((first ? 0 : 1) + (last ? 0 : 1)) * 2.0;
    // tp: the projector's output gathered (forward) and its gradient's slices (backward); the
    // graph tokens are at most the sequence, so this bounds it.
    if (layout.tp > 1 && first) step_comm += microbatches * 2.0 * tokens * D * 4.0;
    plan.comm_per_step = std::max(plan.comm_per_step, step_comm);
    plan.stages.push_back(r);
  }
  if (!devices.cpu) {
    plan.margin = devices.bytes_each - plan.peak;
    plan.fits = plan.margin >= safety_margin_bytes(devices);
  }
  return plan;
}

std::vector<LayoutPlan> plan_all(const PlanJob& job, const Devices& devices) {
  std::vector<LayoutPlan> out;
  for (const Layout& l : layouts_for(devices.count, job)) out.push_back(plan_layout(job, devices, l));
  return out;
}

int recommend(const std::vector<LayoutPlan>& plans) {
  // Data parallelism is the only split that adds throughput here (pp has its bubble; tp splits
  // only GraphGPT's small projector, every tp rank running the whole LLM on the same batch), so
  // it comes first; then the least communication per step; then the most free memory.
  auto better = [](const LayoutPlan& a, const LayoutPlan& b) {
    if (a.layout.dp != b.layout.dp) return a.layout.dp > b.layout.dp;
    if (a.comm_per_step != b.comm_per_step) return a.comm_per_step < b.comm_per_step;
    return a.margin > b.margin;
  };
  int best = -1;
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].fits && (best < 0 || better(plans[i], plans[static_cast<size_t>(best)]))) best = static_cast<int>(i);
  return best;
}

std::vector<Suggestion> suggestions(const PlanJob& job, const Devices& devices) {
  std::vector<Suggestion> out;
  auto best_of = [&](const PlanJob& j, const std::string& change) {
    std::vector<LayoutPlan> plans = plan_all(j, devices);
    if (plans.empty()) return;
    int i = recommend(plans);
    if (i < 0) {  // none fits: the closest
      i = 0;
      for (size_t k = 1; k < plans.size(); ++k)
        if (plans[k].peak < plans[static_cast<size_t>(i)].peak) i = static_cast<int>(k);
    }
    out.push_back({change, plans[static_cast<size_t>(i)]});
  };
  if (job.micro_batch > 1) {
    PlanJob j = job;
    j.micro_batch = 1;
    j.global_batch = 0;  // the rest of the batch in accumulation steps
    best_of(j, "micro-batch 1 with gradient accumulation x" + std::to_string(job.micro_batch) +
                   " (--training.grad_accum_steps)");
  }
  if (!job.checkpointing) {
    PlanJob j = job;
    j.checkpointing = true;
    best_of(j, "activation checkpointing (--training.activation_checkpointing true)");
  }
  if (!job.bf16) {
    PlanJob j = job;
    j.bf16 = true;
    best_of(j, "bf16 (--model.dtype bf16)");
  }
  {
    // More pipeline stages, on more GPUs of this size: the fewest that fit (m = 2 pp
    // micro-batches), or the most there can be (one layer each) when none does.
    PlanJob j = job;
    LayoutPlan p;
    for (int pp = devices.count + 1; pp <= static_cast<int>(job.model.n_layers); ++pp) {
      Devices more = devices;
      more.count = pp;
      j.microbatches = std::max<int64_t>(job.microbatches, 2 * pp);
      p = plan_layout(j, more, Layout{1, pp, 1});
      if (p.fits) break;
    }
    if (!p.stages.empty())
      out.push_back({"pipeline over " + std::to_string(p.layout.pp) + " stages (" + std::to_string(p.layout.pp) +
                         " such GPUs, --parallelism.pp " + std::to_string(p.layout.pp) + ")",
                     p});
  }
  {
    PlanJob j = job;
    j.micro_batch = 1;
    j.global_batch = 0;
    j.checkpointing = true;
    j.bf16 = true;
    best_of(j, "all of: micro-batch 1, activation checkpointing, bf16");
  }
  return out;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

}  // namespace gt
