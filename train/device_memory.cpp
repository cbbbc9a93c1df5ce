#include "train/device_memory.hpp"

#include <c10/core/CachingDeviceAllocator.h>

#include <cstdio>

#include "control/control_client.hpp"

namespace gt {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
}  // namespace

DeviceMemory device_memory(const torch::Device& device) {
  DeviceMemory m;
  if (!device.is_cuda()) return m;
  c10::DeviceAllocator* alloc = c10::getDeviceAllocator(c10::kCUDA);
  const c10::CachingDeviceAllocator::DeviceStats s = alloc->getDeviceStats(device.index());
  m.known = true;
  m.allocated_gib = static_cast<double>(s.allocated_bytes[kAll].current) / kGiB;
  m.peak_allocated_gib = static_cast<double>(s.allocated_bytes[kAll].peak) / kGiB;
  m.peak_reserved_gib = static_cast<double>(s.reserved_bytes[kAll].peak) / kGiB;
  m.total_gib = static_cast<double>(alloc->getMemoryInfo(device.index()).second) / kGiB;
  return m;
}

std::string describe_device_memory(const DeviceMemory& m) {
  if (!m.known) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.2f GiB allocated (peak), %.2f GiB reserved (peak) of %.2f GiB", m.peak_allocated_gib,
                m.peak_reserved_gib, m.total_gib);
  return buf;
}

void note_device_memory(const torch::Device& device) {
  const DeviceMemory m = device_memory(device);
  if (m.known) control::note_gpu_memory(m.peak_allocated_gib * 1024, m.peak_reserved_gib * 1024);
}

std::string out_of_memory_line(const DeviceOutOfMemory& oom, const torch::Device& device) {
  const DeviceMemory m = device_memory(device);
  const std::string when = oom.step > 0 ? " in step " + std::to_string(oom.step)
                                        : std::string(" outside the training steps (loading the model, or saving)");
  std::string line;
  if (m.known) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": %.2f GiB allocated now, %.2f GiB at the peak, %.2f GiB reserved, of %.2f GiB",
                  m.allocated_gib, m.peak_allocated_gib, m.peak_reserved_gib, m.total_gib);
    line = "CUDA out of memory on " + device.str() + when + buf +
           "; `graphtune plan` names a layout that fits these GPUs";
  } else {
    // The allocator's own words, first line only: the rest is libtorch's stack.
    std::string what = oom.what();
    what = what.substr(0, what.find('\n'));
    line = "out of memory on the host" + when + " (" + what + "); `graphtune plan` says what a layout needs";
  }
  return line + ", or set [training].activation_checkpointing = true, or a smaller [training].batch_size or [data].max_len";
}

}  // namespace gt
