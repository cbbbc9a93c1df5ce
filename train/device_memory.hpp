#pragma once
// What a rank's GPU holds, from the CUDA caching allocator's own statistics (what
// torch.cuda.max_memory_allocated and max_memory_reserved read): the peak of tensor bytes
// allocated, and of device memory the allocator reserved for them (allocated plus its cached
// free blocks), against the card's total. Memory outside the allocator (the CUDA context,
// cuBLAS's workspace, NCCL's buffers) is in neither; the planner counts it separately.
#include <torch/types.h>

#include <stdexcept>
#include <string>

namespace gt {

struct DeviceMemory {
  bool known = false;  // false on the CPU
  double allocated_gib = 0, peak_allocated_gib = 0, peak_reserved_gib = 0, total_gib = 0;
};

DeviceMemory device_memory(const torch::Device& device);

// "21.9 GiB allocated (peak), 23.1 GiB reserved (peak) of 23.7 GiB"; "" on the CPU.
std::string describe_device_memory(const DeviceMemory& m);

// The rank's own GPU peaks into the control plane (heartbeats and steps carry them to the
// launcher's metrics.jsonl, TensorBoard and summary). Nothing on the CPU.
void note_device_memory(const torch::Device& device);

// A CUDA allocation that failed, caught where the step it failed in is known: what the rank
// says in its one line (train_command.cpp). step 0: outside the steps (loading, saving).
struct DeviceOutOfMemory : std::runtime_error {
  DeviceOutOfMemory(int64_t step, const std::string& what) : std::runtime_error(what), step(step) {}
  int64_t step;
};

// That one line: the step, the allocator's figures (on a GPU) and what to change. A host that
// ran out (the CPU allocator throws the same error) gets the allocator's own words instead.
std::string out_of_memory_line(const DeviceOutOfMemory& oom, const torch::Device& device);

}  // namespace gt
