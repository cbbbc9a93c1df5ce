#pragma once
// GraphGPT's tuning phases: graph_matching (its stage 1) and task (its stage 2). The same loop
// for both; what differs is the records (data build --task ...) and the starting projector.
// Runs under any [parallelism] layout: data-parallel replicas, the LLM's layers as pipeline
// stages, the projector split over tensor-parallel ranks (train/decoder_stage.hpp).
#include <c10/core/Device.h>

#include "config/job_config.hpp"

namespace gt {

class World;

// Trains on `device` (worker/device_choice.hpp), logs to stderr (world rank 0), writes the
// phase's outputs into [job].out_dir. Returns the exit code.
int run_graph_phase(const JobConfig& cfg, const World& world, const c10::Device& device);

}  // namespace gt
