#pragma once
// GraphGPT's tuning stages: graph_matching (stage 1) and task (stage 2). The same loop for
// both; what differs is the records (data build --task ...) and the starting projector. Runs
// under any [parallelism] layout: data-parallel replicas, the LLM's layers as pipeline stages,
// the projector split over tensor-parallel ranks (train/step_runner.hpp).
#include "config/train_config.hpp"

namespace gt {

class World;

// Trains, logs to stderr (world rank 0), writes the stage outputs into [job].out_dir. Returns
// the exit code.
int run_graph_stage(const TrainConfig& cfg, const World& world);

}  // namespace gt
