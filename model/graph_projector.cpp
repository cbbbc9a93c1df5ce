#include "model/graph_projector.hpp"

#include <torch/torch.h>
#include <torch/serialize.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cmath>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "model/named_weights.hpp"
#include "weights/safetensors.hpp"

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

std::map<std::string, torch::Tensor> load_torch_state_dict(const std::string& path) {
  const std::string bytes = read_file(path);
  torch::IValue v;
  try {
    v = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    if (bytes.find("collections\nOrderedDict") != std::string::npos) v = torch::IValue();  // see below
    else {
    std::string what = e.what_without_backtrace();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    fail(path, "not a torch.save'd dict of tensors: " + what);
    }
  }
  if (v.isNone()) {
    // libtorch's unpickler turns collections.OrderedDict (what a module's state_dict() is) into
    // None, so such files cannot be read here.
    fail(path, "holds a collections.OrderedDict (a module's state_dict()), which libtorch cannot unpickle; "
               "re-save it in Python as a plain dict (torch.save(dict(sd), path)) or as safetensors");
  }
  if (!v.isGenericDict()) fail(path, "not a torch.save'd dict of tensors (the top-level object is a " + v.tagKind() + ")");
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : v.toGenericDict()) {
    if (!item.key().isString()) fail(path, "a key of the dict is a " + item.key().tagKind() + ", not a string");
    const std::string key = item.key().toStringRef();
    if (!item.value().isTensor()) fail(path, "entry '" + key + "' is a " + item.value().tagKind() + ", not a tensor");
    out[key] = item.value().toTensor();
  }
  return out;
}

void save_torch_state_dict(const std::string& path,
                           const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  // torch::pickle_save, except that the dict is written untagged: pickle_save's type tag
  // (torch.jit._pickle.restore_type_tag) is a global that torch.load(weights_only=True), the
  // default since PyTorch 2.6, refuses. Untagged, the file holds only what torch.save writes for
  // a dict of tensors.
  std::vector<char> pickle_data;
  torch::jit::Pickler pickler([&](const char* buf, size_t n) { pickle_data.insert(pickle_data.end(), buf, buf + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(torch::IValue(dict));
  pickler.stop();
  std::vector<char> container;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) -> size_t {
      const char* b = static_cast<const char*>(p);
      container.insert(container.end(), b, b + n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  AtomicFile f(path);
  f.write(container.data(), container.size());
  f.commit();
}

void save_graph_projector_bin(const std::string& path, const GraphProjector& projector) {
  save_torch_state_dict(path, cpu_tensors(projector));
}

GraphProjector load_graph_projector_bin(const std::string& path) {
  return projector_from(load_torch_state_dict(path), path);
}

void save_graph_projector_safetensors(const std::string& path, const GraphProjector& projector) {
  save_safetensors(path, cpu_tensors(projector));
}

GraphProjector load_graph_projector_safetensors(const std::string& path) {
  return projector_from(load_safetensors(path), path);
}

}  // namespace gt
