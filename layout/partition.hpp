#pragma once
// How the decoder layers are cut into pipeline stages. A partition is the first layer index of
// each stage: stages are contiguous and non-empty, stage s runs layers [first[s], first[s+1]),
// the last stage runs to the end. Stage 0 also carries the embeddings (and, in the GraphGPT
// stages, the graph encoder and projector), the last stage the final norm and the head: their
// parameter counts come in as first_extra and last_extra.
#include <cstdint>
#include <vector>

namespace gt {

// What the balanced partition weighs: the parameters of each decoder layer, and those stage 0
// (embeddings; GraphGPT's encoder and projector) and the last stage (final norm and head, a copy
// of the table when tied) hold besides. The model counts them (LlamaImpl::stage_weights).
struct StageWeights {
  std::vector<int64_t> layers;
  int64_t first_extra = 0, last_extra = 0;
};

// The partition into `stages` stages that minimises the largest stage's parameter count
// (extras included). Exact: binary search on that maximum with a greedy feasibility test.
// Among optimal partitions, ties go to the later stages (each takes as many layers as the
// optimum allows, from the last stage backwards), because under 1F1B stage 0 holds the most
// activations. InputError naming [parallelism].pp when there are fewer layers than stages.
std::vector<int> balanced_partition(const std::vector<int64_t>& layer_params, int stages, int64_t first_extra = 0,
                                    int64_t last_extra = 0);
inline std::vector<int> balanced_partition(const StageWeights& w, int stages) {
  return balanced_partition(w.layers, stages, w.first_extra, w.last_extra);
}

// The largest stage's parameter count under `first` (extras included): what
// balanced_partition minimises, for reports and tests.
int64_t max_stage_params(const std::vector<int64_t>& layer_params, const std::vector<int>& first,
                         int64_t first_extra = 0, int64_t last_extra = 0);

// An explicit [parallelism].partition: exactly `stages` entries, starting at 0, strictly
// increasing (no empty stage), all below n_layers. One-line InputError naming
// [parallelism].partition and the offending entry otherwise.
void check_explicit_partition(const std::vector<int>& first, int stages, int n_layers);

}  // namespace gt
