#include "model/memory_tracker.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <stdexcept>

namespace gt {

namespace {

// c10::SetAllocator ignores a lower priority than the installed allocator's; the highest makes
// both installing and restoring take effect.
constexpr uint8_t kPriority = 255;

class CountingAllocator final : public c10::Allocator {
 public:
  c10::Allocator* inner = nullptr;  // the allocator that really allocates
  std::atomic<int64_t> current{0}, peak{0};

  c10::DataPtr allocate(size_t n) override {
    // A DataPtr's context is one pointer, and the freed block's size is not passed to the
    // deleter: the block (the inner DataPtr and its size) becomes the context instead.
    auto* block = new Block{inner->allocate(n), static_cast<int64_t>(n)};
    const int64_t now = current.fetch_add(block->bytes) + block->bytes;
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    void* data = block->inner.get();
    const c10::Device device = block->inner.device();
    return {data, block, &free_block, device};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Block {
    c10::DataPtr inner;
    int64_t bytes;
  };
  static void free_block(void* ctx);
};

// Never destroyed: storages allocated through it may be freed at any time, process exit included.
CountingAllocator& counting() {
  static auto* a = new CountingAllocator;
  return *a;
}

void CountingAllocator::free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  counting().current.fetch_sub(block->bytes);
  delete block;  // the inner DataPtr frees the memory through the inner allocator's deleter
}

}  // namespace

CpuMemoryTracker::CpuMemoryTracker() : previous_(c10::GetCPUAllocator()) {
  auto& a = counting();
  if (previous_ == &a) throw std::logic_error("CpuMemoryTracker scopes cannot nest");
  a.inner = previous_;
  c10::SetCPUAllocator(&a, kPriority);
  if (c10::GetCPUAllocator() != &a) throw std::runtime_error("could not install the counting CPU allocator");
  reset_peak();
}

CpuMemoryTracker::~CpuMemoryTracker() { c10::SetCPUAllocator(previous_, kPriority); }

int64_t CpuMemoryTracker::current_bytes() const { return counting().current.load(); }
int64_t CpuMemoryTracker::peak_bytes() const { return counting().peak.load(); }
void CpuMemoryTracker::reset_peak() { counting().peak.store(counting().current.load()); }

}  // namespace gt
