#pragma once
// A stand-in accelerator for tests on machines without a GPU: libtorch's PrivateUse1 device,
// named "fakegpu". Its memory is host memory and its kernels are the CPU's, so a job computes on
// it what it computes on the CPU (to float rounding: libtorch reaches the kernels of a device it
// does not know through their generic paths); but its tensors are not CPU tensors. What the code
// gets wrong about devices on a GPU it gets wrong here too, and here it is an error:
// every operator on fakegpu tensors is refused when a CPU tensor with elements (not a 0-dim
// scalar, which CUDA's kernels take as well) is among its inputs, with one line naming the
// operator, the argument and its shape. On CUDA such a tensor either fails the same way or is
// copied synchronously, a hidden host wait. A CPU tensor that never meets the device's is not
// seen: on a GPU it is host work, not an error. Autocast (bf16) is not modelled: fp32 only.
#include <c10/core/Device.h>

#include <cstdint>

namespace gt::testing {

// Registers the device once per process (later calls return it again): fakegpu:0.
c10::Device fake_device();

// Of the next `after` tensors the code makes on the fake device itself (at::empty, which zeros,
// ones, full and arange start from), the last comes back on the CPU, as from a factory call that
// forgot its device: what the placement check must catch. With `after_host_read` the count starts
// at the next number read back to the host (a training step reads its loss).
void plant_cpu_tensor(int64_t after, bool after_host_read = false);

// How many operators ran on the fake device so far (the check saw each).
int64_t fake_device_ops();

// How many times the host read the fake device's memory back so far (a copy to the CPU, or
// `.item()`): each is a host wait on a GPU.
int64_t fake_device_host_reads();

}  // namespace gt::testing
