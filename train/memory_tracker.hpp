#pragma once
// Peak CPU tensor memory, for measuring what activation checkpointing saves
// (tests/activation_checkpoint_test.cpp). A counting c10::Allocator is installed in front of
// libtorch's CPU allocator: every tensor storage allocated while it is installed is counted
// until it is freed (even if that happens after the scope ends). Memory that does not go
// through the CPU allocator (oneDNN/BLAS scratch buffers, the allocator's own slack) is not
// counted: the numbers are tensor bytes, not the process's resident size.
#include <cstdint>

namespace c10 {
struct Allocator;
}

namespace gt {

// RAII: installs the counting allocator, resets the peak to the bytes it currently tracks,
// and puts the previous CPU allocator back on destruction. Not nestable (throws), and, like
// c10::SetCPUAllocator itself, meant for one thread at a time to install; allocation and
// freeing from any thread are counted (atomics).
class CpuMemoryTracker {
 public:
  CpuMemoryTracker();
  ~CpuMemoryTracker();
  CpuMemoryTracker(const CpuMemoryTracker&) = delete;
  CpuMemoryTracker& operator=(const CpuMemoryTracker&) = delete;

  int64_t current_bytes() const;  // tracked bytes live now
  int64_t peak_bytes() const;     // most tracked bytes live at once since construction or reset_peak
  void reset_peak();              // peak := current

 private:
  c10::Allocator* previous_;
};

}  // namespace gt
