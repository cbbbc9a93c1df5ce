#pragma once
// Reassembling a model split into pipeline stages, for the outputs a user reads (a Hugging Face
// folder): each stage of the first pipeline (dp 0, tp 0) sends the weights it holds to its
// stage 0, which ends up with every weight by name. Each tensor crosses with a small header (its
// name and shape), so stage 0 needs to know nothing of the others' layers.
#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "parallel/parallel_runtime.hpp"

namespace gt {

// `held`: this rank's weights by name; empty tensors (dropped by keep_only) are skipped. A
// weight two stages hold (tied embeddings) must be equal on both (std::logic_error otherwise). On world rank 0
// returns every weight (float32); elsewhere an empty map. Collective over the pipeline of dp 0,
// tp 0; other ranks return at once.
std::map<std::string, torch::Tensor> gather_pipeline_weights(
    const ParallelRuntime& rt, const std::vector<std::pair<std::string, torch::Tensor>>& held);

}  // namespace gt
