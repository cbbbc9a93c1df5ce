#include "model/graph_projector.hpp"

#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "model/named_weights.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace gt {

GraphProjectorImpl::GraphProjectorImpl(int64_t graph_hidden, int64_t llm_dim) {
  if (graph_hidden <= 0 || llm_dim <= 0) {
    fail("graph projector", "sizes must be positive, got graph_hidden=" + std::to_string(graph_hidden) +
                                " llm_dim=" + std::to_string(llm_dim));
  }
  weight_ = register_parameter("weight", torch::empty({llm_dim, graph_hidden}));
  bias_ = register_parameter("bias", torch::empty({llm_dim}));
  init_weights(0);
}

torch::Tensor GraphProjectorImpl::forward(const torch::Tensor& node_embeds) {
  if (!node_embeds.defined() || node_embeds.dim() < 1 || node_embeds.size(-1) != graph_hidden()) {
    std::ostringstream ss;
    ss << "node embeddings must end in width " << graph_hidden() << ", got shape "
       << (node_embeds.defined() ? node_embeds.sizes() : torch::IntArrayRef{});
    fail("graph projector input", ss.str());
  }
  return torch::linear(node_embeds.to(weight_.device(), weight_.scalar_type()), weight_, bias_);
}

void GraphProjectorImpl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(graph_hidden()));
  weight_.copy_(torch::empty(weight_.sizes(), torch::kFloat32).uniform_(-bound, bound, gen));
  bias_.copy_(torch::empty(bias_.sizes(), torch::kFloat32).uniform_(-bound, bound, gen));
}

std::vector<std::pair<std::string, torch::Tensor>> GraphProjectorImpl::named_weights() const {
  return {{kGraphProjectorWeight, weight_}, {kGraphProjectorBias, bias_}};
}

void GraphProjectorImpl::load_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  auto mine = named_weights();
  for (const auto& [name, t] : weights) {
    if (name != kGraphProjectorWeight && name != kGraphProjectorBias) {
      fail(source, "unexpected tensor '" + name + "' in a graph projector file (expected " +
                       kGraphProjectorWeight + " and " + kGraphProjectorBias + ")");
    }
  }
  copy_named_weights(mine, weights, source, "the graph projector");
}

namespace {

GraphProjector projector_from(const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  auto w = weights.find(kGraphProjectorWeight);
  if (w == weights.end()) fail(source, std::string("missing tensor '") + kGraphProjectorWeight + "'");
  if (w->second.dim() != 2) {
    std::ostringstream ss;
    ss << "tensor '" << kGraphProjectorWeight << "' has shape " << w->second.sizes() << ", expected [llm_dim, graph_hidden]";
    fail(source, ss.str());
  }
  GraphProjector p(w->second.size(1), w->second.size(0));
  p->load_weights(weights, source);
  return p;
}

std::vector<std::pair<std::string, torch::Tensor>> cpu_tensors(const GraphProjector& projector) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& [name, t] : projector->named_weights()) out.emplace_back(name, t.detach().to(torch::kCPU).contiguous());
  return out;
}

}  // namespace

void save_graph_projector_bin(const std::string& path, const GraphProjector& projector, const torch::Tensor& token_rows) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  if (token_rows.defined()) {
    if (token_rows.dim() != 2 || token_rows.size(0) != 2 || token_rows.size(1) != projector->llm_dim())
      throw std::invalid_argument("save_graph_projector_bin: token rows must be [2, llm_dim]");
    tensors.emplace_back(kGraphEmbedTokens, token_rows.detach().to(torch::kCPU).contiguous());
  }
  for (auto& t : cpu_tensors(projector)) tensors.push_back(std::move(t));  // after the embedding: see the header
  save_torch_state_dict(path, tensors);
}

GraphProjectorFile read_graph_projector_bin(const std::string& path) {
  std::map<std::string, torch::Tensor> weights = load_torch_state_dict(path);
  GraphProjectorFile f;
  if (auto e = weights.find(kGraphEmbedTokens); e != weights.end()) {
    const torch::Tensor table = e->second;
    weights.erase(e);
    f.projector = projector_from(weights, path);
    if (table.dim() != 2 || table.size(0) < 2 || table.size(1) != f.projector->llm_dim()) {
      std::ostringstream ss;
      ss << "tensor '" << kGraphEmbedTokens << "' has shape " << table.sizes() << ", expected [V, "
         << f.projector->llm_dim() << "] or [2, " << f.projector->llm_dim() << "] (its last two rows are <g_start>, <g_end>)";
      fail(path, ss.str());
    }
    if (!table.is_floating_point()) fail(path, std::string("tensor '") + kGraphEmbedTokens + "' is not floating point");
    f.token_rows = table.narrow(0, table.size(0) - 2, 2).to(torch::kFloat32);
    return f;
  }
  f.projector = projector_from(weights, path);
  return f;
}

GraphProjector load_graph_projector_bin(const std::string& path) { return read_graph_projector_bin(path).projector; }

void save_graph_projector_safetensors(const std::string& path, const GraphProjector& projector) {
  save_safetensors(path, cpu_tensors(projector));
}

GraphProjector load_graph_projector_safetensors(const std::string& path) {
  return projector_from(load_safetensors(path), path);
}

}  // namespace gt
