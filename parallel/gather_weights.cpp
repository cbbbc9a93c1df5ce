#include "parallel/gather_weights.hpp"

#include <torch/torch.h>

namespace gt {

namespace {
constexpr int kTagHeader = 71, kTagName = 72, kTagData = 73;
constexpr int64_t kMaxDims = 6;
}  // namespace

std::map<std::string, torch::Tensor> gather_pipeline_weights(
    const ParallelRuntime& rt, const std::vector<std::pair<std::string, torch::Tensor>>& held) {
  std::map<std::string, torch::Tensor> out;
  if (rt.coord.dp != 0 || rt.coord.tp != 0) return out;
  if (rt.first_stage()) {
    for (const auto& [name, t] : held)
      if (t.numel() > 0) out[name] = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    for (int s = 1; s < rt.shape.pp; ++s) {
      auto count = torch::zeros({1}, torch::kInt64);
      rt.host.pp->recv(count, s, kTagHeader);
      for (int64_t i = 0; i < count.item<int64_t>(); ++i) {
        auto header = torch::zeros({2 + kMaxDims}, torch::kInt64);
        rt.host.pp->recv(header, s, kTagHeader);
        auto name = torch::zeros({header[0].item<int64_t>()}, torch::kUInt8);
        rt.host.pp->recv(name, s, kTagName);
        std::vector<int64_t> shape;
        for (int64_t d = 0; d < header[1].item<int64_t>(); ++d) shape.push_back(header[2 + d].item<int64_t>());
        auto data = torch::empty(shape, torch::kFloat32);
        rt.host.pp->recv(data, s, kTagData);
        std::string key(reinterpret_cast<const char*>(name.data_ptr<uint8_t>()), static_cast<size_t>(name.numel()));
        // A tied weight both ends hold must have stayed identical (its gradient is summed over
        // the two): a difference is a bug, not something to paper over by picking one.
        auto [it, fresh] = out.emplace(key, data);
        if (!fresh && !torch::equal(it->second, data))
          throw std::logic_error("gather_pipeline_weights: tied weight " + key + " differs between stage 0 and stage " +
                                 std::to_string(s));
      }
    }
    return out;
  }
  std::vector<std::pair<std::string, torch::Tensor>> mine;
  for (const auto& [name, t] : held)
    if (t.numel() > 0) mine.emplace_back(name, t.detach().to(torch::kCPU, torch::kFloat32).contiguous());
  if (static_cast<int64_t>(mine.size()) > 0 && mine.front().second.dim() > kMaxDims)
    throw std::logic_error("gather_pipeline_weights: more than 6 dimensions");
  auto count = torch::full({1}, static_cast<int64_t>(mine.size()), torch::kInt64);
  rt.host.pp->send(count, 0, kTagHeader);
  for (const auto& [name, t] : mine) {
    auto header = torch::zeros({2 + kMaxDims}, torch::kInt64);
    header[0] = static_cast<int64_t>(name.size());
    header[1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) header[2 + d] = t.size(d);
    rt.host.pp->send(header, 0, kTagHeader);
    auto bytes = torch::from_blob(const_cast<char*>(name.data()), {static_cast<int64_t>(name.size())}, torch::kUInt8).clone();
    rt.host.pp->send(bytes, 0, kTagName);
    rt.host.pp->send(t, 0, kTagData);
  }
  return out;
}

}  // namespace gt
