#pragma once
// GraphGPT's tuning stages: graph_matching (stage 1) and task (stage 2). The same loop for
// both; what differs is the records (data build --task ...) and the starting projector.
#include "common/train_config.hpp"

namespace gt {

// Trains, logs to stderr, writes the stage outputs into [job].out_dir. Returns the exit code.
int run_graph_stage(const TrainConfig& cfg);

}  // namespace gt
