#pragma once
// The memory planner behind `graphtune plan`: how many bytes each rank of a training job holds,
// for every dp x pp x tp layout of N devices, derived term by term from what the worker really
// allocates (docs/plan.md). Pure functions, no libtorch: the launcher answers before anything
// is started, and the tests check the arithmetic by hand.
#include <cstdint>
#include <string>
#include <vector>

#include "config/names.hpp"
#include "formats/llama_config.hpp"

namespace gt {

// The decoder's shape: what the byte counts depend on.
struct ModelShape {
  std::string name;
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, hidden_dim = 0, vocab_size = 0;
  bool tied = false;
  int64_t layer_params() const;  // one decoder layer: two norms, q k v o, gate up down
  int64_t total_params() const;  // embeddings + layers + final norm (+ head when not tied)
};
ModelShape model_shape(const std::string& name, const LlamaConfig& config);

// A shape graphtune knows without the model's file ("vicuna-7b", "smollm2", "stories260K":
// formats/model_presets.hpp); InputError listing them otherwise.
ModelShape model_preset(const std::string& name);
// One of those names, or a model file read as training reads it (formats/model_config.hpp): a
// Hugging Face folder (its config.json), a llama2.c .bin (its header), a GGUF file (its
// metadata) or a file preset such as smollm2's GGUF.
ModelShape resolve_model(const std::string& spec);

// What the devices are: N GPUs of some memory each ("2x24GB"), or N CPU processes on one host
// (memory = 0: no limit to check against).
struct Devices {
  bool cpu = false;
  int count = 1;
  double bytes_each = 0;
};
// "2x24GB", "4x40GiB", "8x80G": InputError on a zero count, a non-positive size, a missing part.
Devices parse_gpus(const std::string& spec);

struct PlanJob {
  ModelShape model;
  Phase stage = Phase::kLm;  // lm | graph_matching | task (plan_stage)
  int64_t seq = 2048;        // tokens per sequence (graph phases: [data].max_len)
  int64_t micro_batch = 1;   // sequences per micro-batch on one rank
  int64_t microbatches = 1;  // pipeline micro-batches per step (rank's batch = micro_batch x this)
  // A job config's [training].batch_size, the global batch every layout splits: a layout's
  // micro_batch is then global_batch / (dp x its micro-batches), and a layout whose dp x
  // micro-batches do not divide it is none the worker would run. 0: micro_batch as given.
  int64_t global_batch = 0;
  bool bf16 = true;
  bool checkpointing = false;
  Trainable trainable = Trainable::kGraphGpt;  // graph phases: the projector + 2 rows (+ the encoder), or the projector
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  bool weights_from_file = false;  // loaded (a second copy while loading) or freshly initialised
  int64_t graph_hidden = 128;      // the graph encoder's output width (GraphGPT's 128)
  // trainable = projector+lora: the adapters' parameters in one decoder layer (lora_layer_params).
  int64_t lora_per_layer = 0;
};
// LoRA's parameters in one decoder layer: rank x (in + out) for each target projection
// ("q_proj", ... as [lora].targets names them).
int64_t lora_layer_params(const ModelShape& m, int64_t rank, const std::vector<std::string>& targets);
// --stage: the phases the planner knows (lm, graph_matching, task); InputError otherwise.
Phase plan_stage(const std::string& name);
// InputError on a phase the planner does not know, a non-positive size.
void check_plan_job(const PlanJob& job);

struct Layout {
  int dp = 1, pp = 1, tp = 1;
};
// Every dp x pp x tp = n: tp > 1 only for graph phases (it splits the projector alone), pp at
// most n_layers.
std::vector<Layout> layouts_for(int n, const PlanJob& job);
// The job as `layout` runs it: with a global batch, its micro-batches (at least the schedule's
// minimum) and the micro-batch each rank computes; otherwise the job itself.
PlanJob job_at(const PlanJob& job, const Layout& layout);

// One pipeline stage's rank: bytes of each term.
struct RankMemory {
  int stage = 0;
  int64_t first_layer = 0, last_layer = 0;
  int in_flight = 1;              // micro-batches whose activations are held at once
  double weights = 0;             // frozen weights in their dtype + trainable fp32 master weights
  double autocast_copies = 0;     // bf16: the 16-bit casts of trainable weights autograd keeps
  double activations = 0;         // as configured (checkpointed or not)
  double activations_full = 0;    // without checkpointing
  double activations_ckpt = 0;    // with checkpointing
  double optimizer = 0;           // AdamW's exp_avg, exp_avg_sq (fp32) of the trainables
  // fp32 gradients of the trainables. zero_grad frees them, and backward creates them while it
  // frees the activations: the peak holds the larger of the two, not both.
  double grads = 0;
  double comm = 0;                // dp gradient buckets + pp activations/gradients in transit
  double overhead = 0;            // process baseline (CPU), or CUDA context + cuBLAS workspace (GPU)
  double nccl = 0;                // NCCL's buffers, per communicator with peers (GPU)
  double allocator = 0;           // memory the allocator keeps beyond live tensors (CPU: glibc)
  double setup_peak = 0;          // building the model (CPU): its stage's weights and one tensor's file pages
  // Host memory of the rank at load: the process baseline, its stage's weights in their
  // storage dtype and the file pages of the tensor being copied (a GPU plan's weights are read
  // on the host first); a fresh model is drawn whole in fp32, then cut.
  double host_ram = 0;
  double total = 0;               // the peak: max(training, setup)
  int64_t trainable_params = 0;
};

struct LayoutPlan {
  Layout layout;
  std::vector<RankMemory> stages;  // one per pipeline stage (dp and tp ranks are alike)
  double peak = 0;                 // the largest rank's total
  double comm_per_step = 0;        // bytes a rank moves per step (dp all-reduce + pp transfers)
  double host_ram = 0;             // the largest rank's host memory at load
  bool fits = true;   // GPU: at least safety_margin_bytes free on every GPU
  double margin = 0;  // device memory - peak (negative: does not fit at all)
};

// What a GPU plan keeps free on every GPU: 10% of its memory (0 on CPU).
double safety_margin_bytes(const Devices& devices);

LayoutPlan plan_layout(const PlanJob& job, const Devices& devices, const Layout& layout);
std::vector<LayoutPlan> plan_all(const PlanJob& job, const Devices& devices);
// The recommended layout: among those that fit, the most data parallelism (the one split that
// adds throughput), then the least communication per step, then the most free memory; -1 when
// none fits.
int recommend(const std::vector<LayoutPlan>& plans);

// Where nothing fits: each change alone (smaller micro-batch with accumulation, activation
// checkpointing, more pipeline stages, bf16), with the best layout it gives.
struct Suggestion {
  std::string change;
  LayoutPlan best;
};
std::vector<Suggestion> suggestions(const PlanJob& job, const Devices& devices);

// The CPU calibration (measured, see memory_plan.cpp): process baseline and glibc retention.
double cpu_baseline_bytes(int ranks);

std::string gib(double bytes);  // "12.34 GiB"

}  // namespace gt
