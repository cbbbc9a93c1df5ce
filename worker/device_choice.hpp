#pragma once
// Which device a rank computes on, from [training].device or --device, decided before any
// weight is read. Only c10's Device is included: the choice itself asks libtorch's CUDA hooks.
#include <c10/core/Device.h>

#include <string>

#include "config/job_config.hpp"
#include "config/names.hpp"

namespace gt {

// cpu: the CPU. auto: the CPU, until graphtune's CUDA step lands (docs/gpu.md). cuda: refused
// with one line naming `where` (a gt::InputError, exit 2): when libtorch sees no CUDA device;
// when this host runs more ranks (OpenMPI's local size) than it sees GPUs, naming both counts;
// and otherwise, for now, as not supported yet.
c10::Device choose_device(DeviceKind kind, const std::string& where);

// A job's device ([training].device, named as the user set it), paired with its backend: nccl
// moves CUDA tensors only, so nccl on a CPU job is refused here (the reader refuses it only
// where the config says cpu itself; auto resolves on the rank).
c10::Device choose_job_device(const JobConfig& cfg);

}  // namespace gt
