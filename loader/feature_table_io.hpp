#pragma once
// Node features in GraphGPT's published form, read into a FeatureTable.
//
// GraphGPT ships graph_data_all.pt: a torch.save'd dict {dataset: torch_geometric.data.Data},
// of which only .x ([N, 128] float) and .y (labels) are used. graphtune reads:
//   (a) a torch.save'd dict (or OrderedDict) {name: Data}, GraphGPT's file as it is: read by the
//       restricted unpickler (formats/torch_pickle.hpp), which keeps PyG's, torch_sparse's and
//       numpy's objects as data and calls nothing, so neither torch_geometric nor torch_sparse
//       is needed; or {name: {"x": Tensor, "y": Tensor}} ("y" optional), or {name: Tensor};
//   (b) safetensors with tensors "<name>.x" and optionally "<name>.y" (what
//       scripts/convert_graphgpt_data.py writes from graph_data_all.pt).
// Validation: x is 2-D floating (converted to float32, contiguous); y is integer with one value
// per row ([N] or [N, 1], returned as int64 [N]). Every problem is a one-line InputError naming
// the file and the key.
#include <torch/types.h>

#include <map>
#include <string>

#include "loader/feature_table.hpp"

namespace gt {

// Dispatches on the name: ".safetensors" -> load_feature_table_safetensors, anything else
// (.pt/.pth/.pkl/.bin) -> load_feature_table_torch. When `labels` is given, it receives each
// dataset's y (int64 [N]) for the datasets that have one.
FeatureTable load_feature_table(const std::string& path, std::map<std::string, torch::Tensor>* labels = nullptr);

// Form (a): a torch.save'd plain dict (Python's zip format).
FeatureTable load_feature_table_torch(const std::string& path, std::map<std::string, torch::Tensor>* labels = nullptr);
// Form (b): safetensors "<name>.x" / "<name>.y" (the name is everything before the last dot).
FeatureTable load_feature_table_safetensors(const std::string& path,
                                            std::map<std::string, torch::Tensor>* labels = nullptr);

}  // namespace gt
