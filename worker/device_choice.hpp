#pragma once
// Which device a rank computes on, from [training].device or --device, decided before any
// weight is read. Only c10's Device is included: the choice itself asks libtorch's CUDA hooks.
#include <c10/core/Device.h>

#include <string>

#include "config/job_config.hpp"
#include "config/names.hpp"

namespace gt {

// cpu: the CPU. auto: this rank's GPU where libtorch sees one, else the CPU. cuda: this rank's
// GPU. A rank's GPU is the one of its node-local rank (OpenMPI's) among the visible ones. Refused
// with one line naming `where` (a gt::InputError, exit 2): cuda where libtorch sees no CUDA
// device, and cuda or auto where this host runs more ranks than it shows GPUs, naming both
// counts. Nothing is set up here (use_device does that).
c10::Device choose_device(DeviceKind kind, const std::string& where);

// A job's device ([training].device, named as the user set it), paired with its backend: nccl
// moves CUDA tensors only and mpi host tensors only, so nccl on a CPU job and mpi named for a GPU
// job are refused here (the reader refuses nccl only where the config says cpu itself; auto
// resolves on the rank).
c10::Device choose_job_device(const JobConfig& cfg);

// Makes `device` this process's own: on CUDA the current device (every allocation, NCCL's
// communicators included, goes there), TF32 for fp32 matmuls when `tf32`, and with
// `deterministic` libtorch's deterministic kernels, cuDNN's and a fixed cuBLAS workspace (TF32
// off). Nothing on the CPU.
void use_device(const c10::Device& device, bool tf32, bool deterministic);

// choose_job_device, then use_device with [training]'s settings; an unset [parallelism].backend
// follows the device chosen (nccl on CUDA, mpi on the CPU).
c10::Device use_job_device(JobConfig& cfg);

// "cuda:0 (NVIDIA H200, 139.8 GiB)" or "cpu": the launcher's summary and the rank report.
std::string describe_device(const c10::Device& device);

}  // namespace gt
