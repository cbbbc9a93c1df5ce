#pragma once
// How many CUDA devices this host shows a process, asked of the NVIDIA driver library itself
// (libcuda.so.1, opened with dlopen): the launcher links neither libtorch nor CUDA, and a
// machine without the driver is an answer (0), not a start-up failure. CUDA_VISIBLE_DEVICES
// applies, as it does for the ranks.
#include <string>

namespace gt {

struct CudaDevices {
  int count = 0;
  std::string why_none;  // when count is 0: "no NVIDIA driver (libcuda.so.1 not found)", ...
};

CudaDevices visible_cuda_devices();

}  // namespace gt
