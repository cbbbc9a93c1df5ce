#include "worker/device_choice.hpp"

#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "common/host.hpp"

namespace gt {
namespace {

// Ranks mpirun started on this host; 1 outside mpirun.
int ranks_on_this_host() {
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = env ? std::atoi(env) : 1;
  return n > 0 ? n : 1;
}

}  // namespace

c10::Device choose_device(DeviceKind kind, const std::string& where) {
  if (kind != DeviceKind::kCuda) return c10::Device(c10::kCPU);
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (gpus == 0)
    fail(where, "cuda: no CUDA device on " + this_host_name() + " (libtorch sees none" + cuda_visible_devices_note() +
                    ": no GPU, or a driver older than the CUDA 13 the torch wheel needs; docs/gpu.md)");
  const int ranks = ranks_on_this_host();
  if (ranks > gpus)
    fail(where, "cuda: " + std::to_string(ranks) + " ranks on " + this_host_name() + " but it shows " + std::to_string(gpus) +
                    " GPU" + (gpus == 1 ? "" : "s") + cuda_visible_devices_note() + ": one rank a GPU");
  fail(where, kCudaNotSupportedYet);
}

c10::Device choose_job_device(const JobConfig& cfg) {
  const c10::Device device = choose_device(cfg.training.device, cfg.origin("training", "device"));
  if (device.is_cpu() && cfg.parallelism.backend == Backend::kNccl)
    fail(cfg.origin("parallelism", "backend"), "nccl moves CUDA tensors, but this job computes on the CPU ([training].device " +
                                                   std::string(name_of(cfg.training.device)) + "; use mpi)");
  return device;
}

}  // namespace gt
