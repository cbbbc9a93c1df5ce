#pragma once
// One rank's place in a training job: its coordinate in the dp x pp x tp grid
// (layout/process_grid.hpp), communicators per axis on two channels, and the decoder layers its
// pipeline stage runs. A job started without mpirun is the grid 1 x 1 x 1 with
// LocalCommunicators, so the trainers have one code path whatever the layout.
//
// The two channels: the data communicators ([parallelism].backend: NCCL on a GPU job) move the
// tensors a step computes with (gradients, activations, the projector's shards); the host
// communicators (always MPI) carry what the host decides with: counts, the summed loss and
// gradient norm, the non-finite agreement, barriers, checkpoint names, weights gathered to be
// written. NCCL moves device tensors only, so the control traffic never goes through it.
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "config/job_config.hpp"
#include "layout/partition.hpp"
#include "layout/process_grid.hpp"

namespace gt {

class World;

struct ParallelRuntime {
  GridShape shape;
  GridCoord coord;
  int world_rank = 0;
  std::unique_ptr<Communicator> world, dp, pp, tp;  // the data channel
  // The first and last stage of this rank's pipeline (size 2 when pp > 1, else one rank): both
  // hold the tied embedding/head matrix, and sum its gradient over this group.
  std::unique_ptr<Communicator> ends;
  struct HostChannel {
    std::unique_ptr<Communicator> world, dp, pp, tp;
  } host;  // the same groups, over MPI, for CPU tensors of control
  std::vector<int> partition;               // first decoder layer of each stage
  int64_t first_layer = 0, last_layer = 0;  // this stage runs layers [first_layer, last_layer)

  bool first_stage() const { return coord.pp == 0; }
  bool last_stage() const { return coord.pp == shape.pp - 1; }
  // World rank 0 (dp 0, stage 0, shard 0) prints the log and writes the outputs.
  bool reports() const { return world_rank == 0; }
};

// Forms the groups (collective over the world when under mpirun) and cuts the layers: the
// explicit [parallelism].partition, or the balanced one by the model's parameter counts (its
// stage_weights). The layout must already have passed check_parallel_layout.
ParallelRuntime make_parallel_runtime(const ParallelismSection& parallelism, const World& world,
                                      const StageWeights& weights);

// True once this process has formed its groups (make_parallel_runtime returned): from then on
// an error may be this rank's alone (worker/train_command.cpp decides who reports it).
bool parallel_runtime_formed();

// The 1 x 1 x 1 grid over all `n_layers` layers, without MPI (library callers and tests).
ParallelRuntime single_process_runtime(int64_t n_layers);

}  // namespace gt
