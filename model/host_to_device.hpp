#pragma once
// Copies of host tensors onto the device a step runs on, without making the host wait: the
// tensor is staged in pinned (page-locked) memory and copied with non_blocking, so the copy is
// queued on the current stream like a kernel. Pinned staging comes from libtorch's caching host
// allocator, which records the copy's stream and keeps the block until the copy has finished:
// the host tensor may go at once. On the CPU the tensor itself comes back.
#include <torch/types.h>

namespace gt {

torch::Tensor host_to_device(const torch::Tensor& host, const torch::Device& device);

// The same tensor in pinned memory, for a host buffer built ahead of its copy (the loader's
// workers): pinned once there, the copy in host_to_device then stages nothing.
torch::Tensor pinned(const torch::Tensor& host);

}  // namespace gt
