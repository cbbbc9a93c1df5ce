#pragma once
// GraphGPT's projector: one Linear(graph_hidden_size -> LLM hidden) with bias, mapping each
// encoded node to one graph token. GraphGPT's stage 1 stores it as `graph_projector.bin`, a
// torch.save'd dict {"model.graph_projector.weight": [D, G], "model.graph_projector.bias": [D]},
// which stage 2 and inference load with torch.load. graphtune writes that file with
// torch::pickle_save (which Python's torch.load reads) and reads Python-written ones with
// torch::pickle_load.
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gt {

inline constexpr const char* kGraphProjectorWeight = "model.graph_projector.weight";
inline constexpr const char* kGraphProjectorBias = "model.graph_projector.bias";
// The embedding table a GraphGPT projector file carries the <g_start>/<g_end> rows in.
inline constexpr const char* kGraphEmbedTokens = "model.embed_tokens.weight";

class GraphProjectorImpl : public torch::nn::Module {
 public:
  GraphProjectorImpl(int64_t graph_hidden, int64_t llm_dim);

  int64_t graph_hidden() const { return weight_.size(1); }
  int64_t llm_dim() const { return weight_.size(0); }

  // [..., graph_hidden] -> [..., llm_dim], in the weights' dtype.
  torch::Tensor forward(const torch::Tensor& node_embeds);

  // PyTorch's nn.Linear initialisation, deterministic in seed.
  void init_weights(uint64_t seed);

  // {kGraphProjectorWeight, weight}, {kGraphProjectorBias, bias}.
  std::vector<std::pair<std::string, torch::Tensor>> named_weights() const;
  // Exactly those two names with this projector's shapes; floating dtypes convert. Errors name
  // `source` and the tensor.
  void load_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source);

  const torch::Tensor& weight() const { return weight_; }
  const torch::Tensor& bias() const { return bias_; }

 private:
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(GraphProjector);

// GraphGPT's graph_projector.bin, both ways. GraphGPT's stage 1 saves every parameter named like
// graph_projector or embed_tokens: model.graph_projector.{weight,bias} and
// model.embed_tokens.weight, the whole embedding table [V, D] whose last two rows are the learned
// <g_start>/<g_end>. Its stage-2 loader requires model.embed_tokens.weight ([V, D] or [2, D]) and
// copies its last two rows into those tokens, and loads the projector from
// {key.split('.')[-1]: value} in the file's order, so the projector's weight must come after
// the embedding's (the later "weight" wins).
//
// Writes them in that order, the rows as a [2, D] model.embed_tokens.weight when `token_rows`
// is given; atomically, readable by Python's torch.load (weights_only too). Tensors go to the
// CPU, contiguous, in their dtype.
void save_graph_projector_bin(const std::string& path, const GraphProjector& projector,
                              const torch::Tensor& token_rows = {});
// What a graph_projector.bin (GraphGPT's, or save_graph_projector_bin's) holds: the projector,
// its shapes from the file, and the <g_start>/<g_end> rows [2, D] (the last two rows of
// model.embed_tokens.weight; undefined without it). InputError naming the file on anything else.
struct GraphProjectorFile {
  GraphProjector projector{nullptr};
  torch::Tensor token_rows;
};
GraphProjectorFile read_graph_projector_bin(const std::string& path);
GraphProjector load_graph_projector_bin(const std::string& path);  // the projector alone
// The same two tensors as safetensors (weights/safetensors.hpp).
void save_graph_projector_safetensors(const std::string& path, const GraphProjector& projector);
GraphProjector load_graph_projector_safetensors(const std::string& path);

}  // namespace gt
