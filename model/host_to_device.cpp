#include "model/host_to_device.hpp"

#include <torch/torch.h>

namespace gt {

torch::Tensor host_to_device(const torch::Tensor& host, const torch::Device& device) {
  if (!host.defined() || host.device() == device) return host;
  if (!host.is_cpu() || !device.is_cuda()) return host.to(device);
  return pinned(host).to(device, /*non_blocking=*/true);
}

torch::Tensor pinned(const torch::Tensor& host) {
  if (!host.defined() || !host.is_cpu() || host.is_pinned()) return host;
  return host.pin_memory();
}

}  // namespace gt
