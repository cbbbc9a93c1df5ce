#pragma once
// Phase `grounding`: GraphGPT's text-graph grounding as a training phase. Trains the graph
// encoder (fresh, or [model].graph_encoder) on [data].graph with the CLIP loss of
// train/grounding.hpp, and writes it as [job].out_dir/graph_encoder.safetensors under
// GraphGPT's names: the file the graph phases take as [model].graph_encoder. Each logged step's
// loss and gradient norm go to train_log.jsonl, as in the other phases.
// Keys used: [training] steps, batch_size (nodes per contrastive batch), seed, log_every;
// [optimizer] lr, weight_decay; [parallelism] dp (pp and tp are refused: there is no LLM), each
// step split over the dp ranks as train/grounding.hpp says. World rank 0 logs and writes.
#include <c10/core/Device.h>

#include "config/job_config.hpp"

namespace gt {

class World;

int run_grounding_phase(const JobConfig& cfg, const World& world, const c10::Device& device);

}  // namespace gt
