#include "model/named_weights.hpp"

#include <torch/torch.h>

#include <sstream>

#include "common/error.hpp"

namespace gt {

torch::Tensor add_named_param(torch::nn::Module& root, const std::string& dotted, torch::Tensor t) {
  torch::nn::Module* m = &root;
  size_t start = 0;
  for (size_t dot; (dot = dotted.find('.', start)) != std::string::npos; start = dot + 1) {
    std::string part = dotted.substr(start, dot - start);
    auto children = m->named_children();
    if (auto* found = children.find(part)) {
      m = found->get();
    } else {
      m = m->register_module(part, std::make_shared<torch::nn::Module>()).get();
    }
  }
  return m->register_parameter(dotted.substr(start), std::move(t));
}

void copy_named_weights(const std::vector<std::pair<std::string, torch::Tensor>>& mine,
                        std::map<std::string, torch::Tensor> weights, const std::string& source,
                        const std::string& what, const std::string& prefix) {
  for (const auto& [name, t] : weights) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;  // outside the prefix: not ours
    bool known = false;
    for (const auto& m : mine) known |= prefix + m.first == name;
    if (!known) fail(source, "unexpected tensor '" + name + "' for " + what);
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : mine) {
    auto it = weights.find(prefix + name);
    if (it == weights.end()) fail(source, "missing tensor '" + prefix + name + "'");
    const torch::Tensor& t = it->second;
    if (t.sizes() != p.sizes()) {
      std::ostringstream ss;
      ss << "tensor '" << prefix << name << "' has shape " << t.sizes() << ", " << what << " needs " << p.sizes();
      fail(source, ss.str());
    }
    if (!t.is_floating_point()) fail(source, "tensor '" + prefix + name + "' is not floating point");
    const_cast<torch::Tensor&>(p).copy_(t);
    weights.erase(it);
  }
}

}  // namespace gt
