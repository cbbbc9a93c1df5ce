#pragma once
// Modules whose parameters carry checkpoint names as they are ("model.layers.0.self_attn.
// q_proj.weight", "gtLayers.0.qTrans"), and the checked copy of a name -> tensor map into them.
// Shared by the LLaMA decoder, the graph encoder and the projector.
#include <torch/types.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gt {

// Registers `t` under a dotted name by creating plain intermediate modules, so that
// named_parameters() yields the name unchanged (register_parameter itself refuses dots).
torch::Tensor add_named_param(torch::nn::Module& root, const std::string& dotted, torch::Tensor t);

// Copies weights[prefix + name] into each of `mine` after checking: every name present, shapes
// equal, floating point (dtypes convert). Tensors of `weights` under `prefix` that are not in
// `mine` are errors too; those outside it are ignored. Errors name `source` and the tensor, and
// `what` ("the config", "the graph encoder") in shape messages. Each source tensor is let go
// once copied: handed over (std::move), a mapped file's pages are given back as the copy goes
// (weights/safetensors.hpp), not all at the end.
void copy_named_weights(const std::vector<std::pair<std::string, torch::Tensor>>& mine,
                        std::map<std::string, torch::Tensor> weights, const std::string& source,
                        const std::string& what, const std::string& prefix = "");

}  // namespace gt
