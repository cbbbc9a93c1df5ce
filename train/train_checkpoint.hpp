#pragma once
// A training run's sharded checkpoints (the format and the commit rule: checkpoint/). Each
// trainer lists what its rank holds; this decides which rank writes which tensor, writes and
// commits, and on resume reads back every rank's boxes at whatever layout the run has now.
//
// What a checkpoint holds, by key:
//   model/<name>              a weight (global Hugging Face name), trainable ones always, frozen
//                             ones with [checkpoint].save_frozen
//   optim/<name>/exp_avg      AdamW's moments, boxed like the weight (elementwise, so they
//   optim/<name>/exp_avg_sq   reshard exactly), and its step count
//   optim/<name>/step
//   rng/rank_<r>              rank r's libtorch CPU generator (restored at the same layout only)
// The data position is the step: batch k of every stream is a function of k and the seed.
//
// Copies held by several ranks (data-parallel replicas; tensor-parallel ranks for an unsplit
// tensor) are written once, spread over the holders round-robin so that they share the I/O.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/index.hpp"
#include "config/job_config.hpp"
#include "train/train_loop.hpp"

namespace gt {

struct ParallelRuntime;

// The <g_start>/<g_end> rows' name in a graph phase's checkpoints ([2, dim]); the projector's
// are kGraphProjectorWeight and kGraphProjectorBias (model/graph_projector.hpp).
inline constexpr const char* kGraphTokenRowsName = "model.graph_token_rows";
// The key a weight is saved under.
inline std::string weight_key(const std::string& name) { return "model/" + name; }

struct CheckpointedTensor {
  std::string name;        // global name: "model.graph_projector.weight", "model.layers.3.mlp..."
  at::Tensor tensor;       // this rank's: the whole weight, or its tensor-parallel slice
  int tp_dim = -1;         // split over the tp ranks along this dimension; -1: every tp rank has it whole
  bool trainable = false;  // updated by the optimizer: always saved, with its AdamW state
  // False on the second holder of a tied weight (the last stage's copy of the embeddings): the
  // first stage saves it, both load it.
  bool save = true;
};

// [checkpoint].resume resolved ("latest" or a folder) and checked against this job's settings:
// every key of the saved config that a resume must share (checkpoint_config below). Empty
// folder: no resume. Runs before any weight is read; InputError naming the index and the key.
struct ResumePoint {
  std::string folder;
  ckpt::Index index;
};
ResumePoint find_resume_point(const JobConfig& cfg);

// The settings that decide what a run computes (not how it is laid out): the keys a resume
// must share with the saved run.
std::map<std::string, std::string> checkpoint_config(const JobConfig& cfg);

// Identity of a model: a hash of its parts' names and global shapes, which the trainer lists
// ("name" -> shape) from the full model before a stage keeps its share.
std::string model_fingerprint(const std::map<std::string, std::vector<int64_t>>& shapes);

class TrainCheckpoint {
 public:
  // `tensors`: everything this rank holds that a checkpoint covers; the trainable ones must be
  // the tensors the optimizer updates. `total_steps`: the run's length (a resume must match it).
  TrainCheckpoint(const ParallelRuntime& rt, const JobConfig& cfg, int64_t total_steps,
                  std::vector<CheckpointedTensor> tensors, std::string model_fingerprint);

  // With [checkpoint].resume: loads every tensor this rank holds (resharded when the layout
  // differs; frozen ones only if saved) and returns the step to continue from; else 0.
  // Collective over the world.
  int64_t resume();

  // For run_train_loop: the first step, the optimizer state put back, a save every
  // [checkpoint].every steps and after the last one; under the launcher, each step's numbers
  // sent to it and, when it asks the job to stop, a save at the step all ranks agree on.
  TrainLoopHooks hooks();

  // Saves the state after `step` optimizer steps. Collective over the world.
  void save(int64_t step, torch::optim::AdamW* opt);

  // A file every checkpoint carries (copied by the reporting rank, checksummed in the index),
  // under its own name: the tokenizer a run trained, which its weights are meaningless without.
  void add_file(std::string path) { files_.push_back(std::move(path)); }
  // A file written from `contents`: config.json, the LLM's Hugging Face config, which makes a
  // checkpoint readable on its own (graphtune export).
  void add_file_contents(std::string name, std::string contents) { contents_[std::move(name)] = std::move(contents); }

 private:
  void restore_optimizer(torch::optim::AdamW* opt);
  const ParallelRuntime& rt_;
  const JobConfig& cfg_;
  int64_t total_steps_;
  std::vector<CheckpointedTensor> tensors_;
  std::string fingerprint_;
  int64_t first_step_ = 0;
  int64_t last_saved_ = -1;   // the step of this run's newest save
  std::string resumed_from_;  // the checkpoint folder resume() read
  std::vector<std::string> files_;
  std::map<std::string, std::string> contents_;
  // A resume's AdamW state by weight name, held until the optimizer exists.
  struct Moments {
    at::Tensor exp_avg, exp_avg_sq;
    int64_t step = 0;
  };
  std::map<std::string, Moments> pending_;
};

}  // namespace gt
