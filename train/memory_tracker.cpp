#include "train/memory_tracker.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>

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
    c10::DataPtr block = inner->allocate(n);
    void* data = block.get();
    if (!data) return block;  // an empty allocation: nothing to count
    const c10::Device device = block.device();
    const int64_t bytes = static_cast<int64_t>(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.emplace(data, Block{std::move(block), bytes});
    }
    const int64_t now = current.fetch_add(bytes) + bytes;
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    // The context is the data pointer itself, as raw_allocate requires (libtorch's CPU flash
    // attention allocates its buffers that way): the deleter finds the block by its address.
    return {data, data, &free_block, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Block {
    c10::DataPtr inner;  // frees the memory through the inner allocator's deleter
    int64_t bytes;
  };
  static void free_block(void* data);
  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
};

// Never destroyed: storages allocated through it may be freed at any time, process exit included.
CountingAllocator& counting() {
  static auto* a = new CountingAllocator;
  return *a;
}

void CountingAllocator::free_block(void* data) {
  CountingAllocator& a = counting();
  c10::DataPtr inner;  // destroyed after the lock is released
  {
    std::lock_guard<std::mutex> lock(a.mutex_);
    auto it = a.blocks_.find(data);
    if (it == a.blocks_.end()) return;
    a.current.fetch_sub(it->second.bytes);
    inner = std::move(it->second.inner);
    a.blocks_.erase(it);
  }
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
