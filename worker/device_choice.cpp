#include "worker/device_choice.hpp"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "common/host.hpp"

namespace gt {
namespace {

// Ranks mpirun started on this host, and this one's place among them; 1 and 0 outside mpirun.
int ranks_on_this_host() {
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = env ? std::atoi(env) : 1;
  return n > 0 ? n : 1;
}

int local_rank() {
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int r = env ? std::atoi(env) : 0;
  return r > 0 ? r : 0;
}

}  // namespace

c10::Device choose_device(DeviceKind kind, const std::string& where) {
  if (kind == DeviceKind::kCpu) return c10::Device(c10::kCPU);
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (gpus == 0 && kind == DeviceKind::kAuto) return c10::Device(c10::kCPU);
  if (gpus == 0)
    fail(where, "cuda: no CUDA device on " + this_host_name() + " (libtorch sees none" + cuda_visible_devices_note() +
                    ": no GPU, or a driver older than the CUDA 13 the torch wheel needs; docs/gpu.md)");
  // For correctness checks on a one-GPU machine (scripts/device/gpu_check.sh, where each rank
  // also names its own NCCL_HOSTID, which NCCL then accepts): every rank takes GPU 0.
  if (std::getenv("GRAPHTUNE_TEST_SHARE_GPU")) return c10::Device(c10::kCUDA, 0);
  const int ranks = ranks_on_this_host();
  if (ranks > gpus)
    fail(where, std::string(kind == DeviceKind::kAuto ? "auto" : "cuda") + ": " + std::to_string(ranks) + " ranks on " +
                    this_host_name() + " but it shows " + std::to_string(gpus) + " GPU" +
                    (gpus == 1 ? "" : "s") + cuda_visible_devices_note() + ": one rank a GPU" +
                    (kind == DeviceKind::kAuto ? " (or --device cpu)" : ""));
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank()));
}

c10::Device choose_job_device(const JobConfig& cfg) {
  const c10::Device device = choose_device(cfg.training.device, cfg.origin("training", "device"));
  if (device.is_cpu() && cfg.parallelism.backend == Backend::kNccl)
    fail(cfg.origin("parallelism", "backend"), "nccl moves CUDA tensors, but this job computes on the CPU ([training].device " +
                                                   std::string(name_of(cfg.training.device)) + "; use mpi)");
  if (device.is_cuda() && cfg.parallelism.backend_given && cfg.parallelism.backend == Backend::kMpi)
    fail(cfg.origin("parallelism", "backend"), "mpi moves host tensors, but this job computes on " + device.str() +
                                                   " (use nccl, or leave [parallelism].backend unset)");
  return device;
}

void use_device(const c10::Device& device, bool tf32, bool deterministic) {
  if (!device.is_cuda()) return;
  // cuBLAS reads its workspace setting when its first handle is made: before any matmul.
  if (deterministic) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  c10::cuda::set_device(device.index());
  at::Context& ctx = at::globalContext();
  const bool fast = tf32 && !deterministic;
  ctx.setAllowTF32CuBLAS(fast);
  ctx.setAllowTF32CuDNN(fast);
  if (deterministic) {
    // warn_only: an operation without a deterministic kernel says so in a warning naming it,
    // rather than ending a run that asked only for repeatability.
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
  }
}

c10::Device use_job_device(JobConfig& cfg) {
  const c10::Device device = choose_job_device(cfg);
  if (!cfg.parallelism.backend_given) cfg.parallelism.backend = device.is_cuda() ? Backend::kNccl : Backend::kMpi;
  use_device(device, cfg.training.tf32, cfg.training.deterministic);
  return device;
}

std::string describe_device(const c10::Device& device) {
  if (!device.is_cuda()) return device.str();
  // libtorch's own query (its cached properties): the worker links CUDA only through libtorch.
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device.index());
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s (%s, %.1f GiB, sm%d%d)", device.str().c_str(), prop->name,
                static_cast<double>(prop->totalGlobalMem) / (1 << 30), prop->major, prop->minor);
  return buf;
}

}  // namespace gt
