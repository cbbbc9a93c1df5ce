#pragma once
// The job config of `graphtune train` and `graphtune eval`: one TOML file, one struct per
// section in the torchtitan manner, every key overridable as --section.key VALUE. Read and
// validated whole before anything is allocated; each error names the file (or the flag), the
// key and what was expected. The closed sets are enums (config/names.hpp), and the defaults
// that depend on other keys (runs/<name>, its eval/ and checkpoints/ folders) are filled in
// where the file is read. Each component takes the sections it needs.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/names.hpp"

namespace gt {

// [job]
struct JobSection {
  std::string name = "graphtune";
  std::string out_dir;  // default: runs/<name>
  // A folder holding an earlier run's committed work (checkpoints, a finished phase's outputs) is
  // refused unless the job resumes that run or this is set (`--overwrite`): then it is cleared.
  bool overwrite = false;
};

// [model] A model the user has (llama2.c .bin, Hugging Face folder, GGUF file or preset), or a
// fresh one.
struct ModelSection {
  std::string path;
  // "auto": the model's own tokenizer when [model].path is set, else the built-in byte
  // tokenizer ("bytes"); or a tokenizer.model / llama2.c tokenizer file; or "train".
  std::string tokenizer = "auto";
  // tokenizer = "train" (phase lm, fresh model): a SentencePiece BPE tokenizer of this many
  // pieces is trained on the phase's texts and saved with the model.
  int64_t vocab_size = 1024;
  int64_t dim = 64, n_layers = 4, n_heads = 4, n_kv_heads = 2, hidden_dim = 176, max_seq_len = 256;
  DType dtype = DType::kFp32;  // fp32 | bf16
  // The graph phases: the graph encoder ("" = fresh, seeded; GraphGPT's released folder, its
  // config.json and CLIP state dict, model/graph_encoder_folder.hpp; or a safetensors file or a
  // torch.save'd dict, tensors under graph_encoder_prefix, e.g. "gnn." in the CLIP file) and
  // the projector to start from ("" = fresh; stage 2 starts from stage 1's graph_projector.bin,
  // or from a stage-1 checkpoint: a step_* folder or a folder of them, docs/checkpoints.md).
  std::string graph_encoder, graph_encoder_prefix, projector;
  // A fresh graph encoder's kind, GraphGPT's gnn_type: "gt" (its graph transformer) or "gcn" (the
  // two-layer GCN of its clip_gcn_arxiv tower); or "llaga", LLaGA's neighbourhood-detail template
  // (no GNN: each slot of a fixed-shape neighbour tree is a graph token, model/graph_encoder.hpp),
  // whose tree llaga_hops and llaga_fanout shape (the records' shape: graphtune data build
  // --template llaga); or "hop_field", LLaGA's hop-field overview (no GNN: the centre's features
  // after 0..hop_field_hops propagation steps over the whole [data].graph, one token a hop;
  // records from graphtune data build --template hop_field). An encoder read from a file is the
  // kind its tensors, metadata or config.json say.
  std::string graph_encoder_type = "gt";
  int64_t llaga_hops = 2, llaga_fanout = 10;
  int64_t hop_field_hops = 4;
  // A fresh hop_field encoder's node-feature rows before the hops: "as_is"; "l1" or "l2", each row
  // over its L1 or L2 norm (common/template_tree.hpp); written into the encoder's file.
  std::string hop_field_rows = "as_is";
  // How a fresh hop_field encoder's projector reads its hops: "shared", one map for every hop; or
  // "per_hop", each hop its own map, the projector K + 1 times wider (common/template_tree.hpp).
  std::string hop_field_projector = "shared";
  // A fresh hop_field encoder's base ("" = none): one of GraphGPT's encoders in a file (a
  // grounding's graph_encoder.safetensors, say) whose output for every node, standardised, stands
  // beside the features before the propagation; frozen, and written into the stage's encoder file.
  std::string hop_field_base;
  // A PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors) applied to the
  // LLM: what a projector+lora stage wrote, for eval or the next stage ("" = none).
  std::string adapter;
  // The graph phases: the dropout probability of the frozen encoder while training (gt: after its
  // input projection; gcn: its input and hidden layer; llaga and hop_field: the node features
  // their tokens carry; 0 = none, the encoder then runs in eval mode). GraphGPT's reference trains
  // with 0.1 active (HF Trainer's model.train() reaches the frozen tower). Masks are drawn per
  // graph from [training].seed, the global batch and the record, so every layout draws the same.
  // Phase grounding, where the encoder trains: its dropout where set (> 0), else its own.
  double encoder_dropout = 0.0;

  bool bf16() const { return dtype == DType::kBf16; }
};

// [data]
struct DataSection {
  // Phase lm's corpus: "embedded" (the synthetic graph below), "graph" (the texts of
  // [data].graph), or a text file (one document a line).
  std::string source = "embedded";
  int64_t seed = 42, nodes = 2000, classes = 7;  // the embedded generator's defaults
  double noise = 0.4;
  // The graph phases: instruction records (GraphGPT's JSON), the graph whose node features they
  // index ("embedded", a graphtune text-graph folder or a Cora-ML folder) or a feature file,
  // GraphGPT's model_max_length, and background threads preparing batches.
  std::string instructions, graph = "embedded", features;
  int64_t max_len = 2048, num_workers = 2;
  // [data].template, how conversations are rendered and masked: "vicuna_v1_1" (GraphGPT's
  // training prompt), "graphchat_v1" (its evaluation prompt: the same layout, another system
  // message), "chatml" (SmolLM2-Instruct's), "qwen2.5" (ChatML with Qwen2.5's system message) or
  // "llama3" (Llama 3.0's header template) or "llama3.1" (3.1's to 3.3's: a dated system message
  // always first); data/chat_template.hpp.
  std::string chat_template = "vicuna_v1_1";
  // Drop invalid records (and, in the graph phases and eval, records whose nodes are not in the
  // feature tables) with one line saying how many, instead of stopping at the first.
  bool skip_invalid = false;
  // The graph phases: records of similar token length share a global batch and its micro-batches,
  // which are padded to their longest record (Hugging Face's group_by_length; the batch order
  // stays shuffled by seed and epoch; loader/graph_batches.hpp).
  bool group_by_length = false;
};

// [training]
struct TrainingSection {
  Phase stage = Phase::kLm;  // [training].stage
  // steps = 0: epochs over the instruction records (GraphGPT: 3 for stage 1, 2 for stage 2).
  int64_t steps = 200, epochs = 0, batch_size = 8, seq_len = 128, grad_accum_steps = 1, seed = 1234;
  Trainable trainable = Trainable::kGraphGpt;
  bool trains_token_rows() const { return trainable == Trainable::kGraphGpt || trainable == Trainable::kGraphGptEncoder; }
  bool trains_encoder() const {
    return trainable == Trainable::kGraphGptEncoder || trainable == Trainable::kProjectorLoraEncoder;
  }
  bool trains_lora() const {
    return trainable == Trainable::kProjectorLora || trainable == Trainable::kProjectorLoraEncoder;
  }
  double max_grad_norm = 1.0;
  int64_t log_every = 10, threads = 0;  // 0: all cores
  // Recompute each decoder layer's activations in the backward pass instead of keeping them:
  // less memory for one more forward of every layer.
  bool activation_checkpointing = false;
  // The graph phases: each micro-batch's records packed back to back in one sequence, attention
  // kept within each record and its positions restarted, so no padding is computed
  // (loader/packed_batch.hpp); the loss and gradients are the padded batch's. false: padded rows.
  bool packing = true;
  // Packed micro-batches: the prompt prefix most of a micro-batch's records begin with (the
  // system prompt and the task's words before the first graph) packed and computed once, each
  // of those records attending to it as to its own first positions (loader/packed_batch.hpp);
  // the same loss and gradients. false: each record computes its own copy.
  bool share_prefix = true;
  // A step whose loss or gradient norm is NaN or infinite (a bad record, an overflow): with
  // skip_step its update is not applied (all ranks skip the same step; counted and reported),
  // and the run aborts once max_skipped_in_a_row steps in a row were skipped (a diverged
  // model, not a bad batch); with abort the first one ends the run.
  NonFinitePolicy on_nonfinite = NonFinitePolicy::kSkipStep;
  int64_t max_skipped_in_a_row = 5;
  // Where every rank computes (train, eval; --device): auto, cpu or cuda (names.hpp).
  DeviceKind device = DeviceKind::kAuto;
  // On CUDA: fp32 matmuls and convolutions in TF32 (10-bit mantissa, the tensor cores' rate), as
  // the reference recipe runs. The bf16 matmuls of a bf16 run are unaffected.
  bool tf32 = true;
  // On CUDA: deterministic kernels only (libtorch's deterministic algorithms, cuDNN's, a fixed
  // cuBLAS workspace) and TF32 off, so that a resumed run repeats the uninterrupted one bit for
  // bit, at a cost in speed (docs/gpu.md). The CPU path is deterministic either way.
  bool deterministic = false;
};

// [optimizer] AdamW
struct OptimizerSection {
  double lr = 3e-3, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  // The graph encoder's peak learning rate and weight decay when it trains ("graphgpt+encoder"),
  // on the same schedule as lr; read with lr and weight_decay as their defaults.
  double encoder_lr = 3e-3, encoder_weight_decay = 0.0;
};

// [lr_scheduler] linear warm-up, then cosine decay to min_lr_ratio * lr
struct LrSchedulerSection {
  double warmup_ratio = 0.03, min_lr_ratio = 0.0;
};

// [lora] The adapters [training].trainable = "projector+lora" trains on the frozen LLM: on each
// target projection W of every decoder layer, W x + (alpha / rank) B A x, with A [rank, in] and
// B [out, rank] (PEFT's LoRA, dropout 0; model/lora.hpp). targets: a comma-separated list of
// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
struct LoraSection {
  int64_t rank = 8;
  double alpha = 16.0;
  std::vector<std::string> targets = {"q_proj", "v_proj"};
};

// [eval] `graphtune eval`: prompts per generation batch, the answer's token budget, decoding,
// the class lists answers are scored against, and where predictions.jsonl, metrics.json and
// GraphGPT's result files go (default: [job].out_dir + "/eval").
struct EvalSection {
  EvalProtocol protocol = EvalProtocol::kGraphtune;
  int64_t batch_size = 8;
  // 0: enough for the records' own answers (the longest reference answer's tokens, half again
  // and at least 32, at most 1,024), so chain-of-thought answers are not cut; graphgpt: 1,024.
  int64_t max_new_tokens = 0;
  // 0 is greedy; above it, sampling with nucleus top_p, seeded per record from `seed` so that
  // an answer does not depend on the batch it was generated in.
  double temperature = 0.0, top_p = 1.0;
  int64_t seed = 1234;
  std::string chat_template;  // the prompt: [data].template, or graphchat_v1 under graphgpt
  // Class lists by dataset (the record id's prefix): a JSON file (data/class_lists.hpp). A
  // dataset it does not name is scored against [data].graph's classes.
  std::string classes;
  std::string out_dir;
  // Answer from the text alone: the records' <graph> markers are dropped and no graph token
  // is spliced (the baseline a graph model must beat).
  bool text_only = false;
  // "free": an answer is whatever the model writes. "choices": a node-classification answer is
  // decoded within its dataset's class names and a link prediction's within yes and no (the
  // tokens the model was trained to write for each, model/answer_choices.hpp), so it always
  // names one; other records stay free.
  std::string answers = "free";
  // An interrupted eval in out_dir (its committed answers, eval/eval_progress.hpp) is continued
  // (resume) or replaced (overwrite); with neither, it is refused rather than lost.
  bool resume = false, overwrite = false;
  // Batches each pipeline decodes at once, served round robin so that its stages work side by
  // side (layout/decode_pipeline.hpp); 0: one more than it has stages. As many as stages is
  // enough in the textbook, where every stage's round costs the same; the last stage's head and
  // a batch's prefill cost more, and one more batch in flight answered 1.6x faster than with
  // as many (bench/eval_layouts.sh, pp 2 on SmolLM2).
  int64_t in_flight = 0;
  // The prompt prefix the records share (loader/shared_prefix.hpp) computed once per run and each
  // prompt's prefill started after it; false: every prompt computed whole.
  bool prefix_cache = true;
};

// [parallelism] The process grid (world = dp x pp x tp, see layout/process_grid.hpp and
// docs/parallelism.md), the pipeline schedule, how many micro-batches [training].batch_size is
// split into, and the pipeline partition. What needs the world size or the model is checked by
// check_parallel_layout.
struct ParallelismSection {
  int64_t dp = 1, pp = 1, tp = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t microbatches = 1;  // unset in the config: pp
  // The graph phases' packed micro-batches: a step's records dealt over its micro-batches so
  // that each holds about the same tokens (loader/token_balance.hpp), which keeps a pipeline's
  // stages evenly busy; the same result. false: micro-batches as the stream cuts them, by count.
  bool balance_microbatches = true;
  // The first decoder layer of each stage ([parallelism].partition = "0,6,12"); empty for
  // "balanced", the partition by parameter count.
  std::vector<int> partition;
  // Data-parallel gradients are summed in buckets of this many MiB, each started as soon as its
  // gradients are ready, so the reduction overlaps with the rest of backward (PyTorch DDP: 25).
  double bucket_mb = 25;
  // Seconds any one communication may wait for a peer before the job is aborted, naming the
  // operation and the peer (a dead or stalled rank must not leave the others waiting forever).
  double timeout_s = 300;
  // mpi (CPU tensors, always built) or nccl (CUDA tensors; its library is loaded only when asked).
  // Unset, it follows [training].device: nccl for cuda, mpi for cpu; nccl with cpu is refused.
  Backend backend = Backend::kMpi;
  bool backend_given = false;
};

// [checkpoint] Sharded checkpoints (checkpoint/, docs/checkpoints.md) of the lm and graph
// phases: every `every` optimizer steps and at the last one (0: none), into `dir` (default
// <out_dir>/checkpoints), keeping the newest `keep_latest` committed ones (0: all). Frozen
// weights (GraphGPT's LLM and encoder) are saved only with save_frozen; a resume reads them
// from [model] as the saved run did. `resume` ("latest" or a checkpoint folder; `--resume` on
// the command line) continues a run from its step, at this or another layout.
struct CheckpointSection {
  int64_t every = 0, keep_latest = 3;
  std::string dir, resume;
  bool save_frozen = false;
};

struct JobConfig {
  std::string file;  // the TOML file ("" = defaults and overrides only)
  JobSection job;
  ModelSection model;
  DataSection data;
  TrainingSection training;
  OptimizerSection optimizer;
  LrSchedulerSection lr_scheduler;
  LoraSection lora;
  EvalSection eval;
  ParallelismSection parallelism;
  CheckpointSection checkpoint;

  std::set<std::string> overridden;  // the "section.key" names given on the command line

  // "FILE: [section].key" ("config: ..." without a file), for the errors that later checks
  // raise about a setting.
  std::string where(const std::string& section, const std::string& key) const;
  // The same as the reader names it: "command line --section.key" for an override.
  std::string origin(const std::string& section, const std::string& key) const;
};

// What the config is read for. Every key of every section is read (and type-checked) either
// way, so one file serves both; kTrain checks what the phase needs to train ([training].steps,
// a supported phase, records for a graph phase); kEval checks instead what evaluation needs
// ([model].path and [data].instructions) and ignores the training-only requirements.
enum class ConfigUse { kTrain, kEval };

JobConfig read_job_config(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
                          ConfigUse use = ConfigUse::kTrain);
// The same from TOML text; `name` stands for the file in errors and in JobConfig::file.
JobConfig read_job_config_text(const std::string& text, const std::string& name,
                               const std::vector<std::pair<std::string, std::string>>& overrides,
                               ConfigUse use = ConfigUse::kTrain);

// The checks of [parallelism] that need the number of ranks mpirun started and the model's
// decoder layer count (read_job_config does the rest): dp*pp*tp must equal world_size, pp may
// not exceed n_layers, and an explicit partition must fit the model. One-line InputError naming
// [parallelism] and the numbers. Meant to run once, before any rank loads the model. kEval skips
// what only a training step has: its micro-batches and their split of [training].batch_size.
void check_parallel_layout(const JobConfig& c, int world_size, int n_layers, ConfigUse use = ConfigUse::kTrain);

}  // namespace gt
