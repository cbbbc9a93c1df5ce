#pragma once
// An ordered, bounded prefetcher: worker threads produce items 0, 1, 2, ... of an endless
// sequence ahead of the consumer, and next() hands them out strictly in index order, whatever
// order the workers finish in. So the sequence a consumer sees does not depend on the number of
// workers, only on produce(k). No libtorch.
//
// * produce(k) is called at most once per k, from any worker thread (it must be safe to call
//   concurrently for different k). With num_workers == 0 there are no threads: next() calls
//   produce in the caller's thread.
// * At most `capacity` items (ready or being produced) are ahead of the consumer: a worker may
//   start item k only while k < consumed + capacity.
// * An exception thrown by produce(k) is stored and re-thrown by the next() that asks for item
//   k, as the same exception object (std::exception_ptr), so its type and message are intact.
//   Later items are not affected.
// * wait_seconds() is the total time next() spent blocked (waiting for a worker, or producing
//   the item itself when there are no workers).
// * The destructor stops the workers: those producing an item finish it (produce is not
//   interrupted), those waiting wake up; all are joined. It never waits for items no one asked for.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace gt {

template <typename T>
class OrderedPrefetcher {
 public:
  using Produce = std::function<T(int64_t)>;

  // capacity 0: 2 * num_workers.
  OrderedPrefetcher(Produce produce, int32_t num_workers, int64_t capacity = 0)
      : produce_(std::move(produce)),
        capacity_(capacity > 0 ? capacity : 2 * static_cast<int64_t>(num_workers)) {
    if (num_workers < 0) throw std::invalid_argument("OrderedPrefetcher: num_workers < 0");
    if (num_workers > 0 && capacity_ < 1) throw std::invalid_argument("OrderedPrefetcher: capacity < 1");
    threads_.reserve(static_cast<size_t>(num_workers));
    try {
      for (int32_t i = 0; i < num_workers; ++i) threads_.emplace_back([this] { work(); });
    } catch (...) {
      stop_and_join();
      throw;
    }
  }

  ~OrderedPrefetcher() { stop_and_join(); }

  OrderedPrefetcher(const OrderedPrefetcher&) = delete;
  OrderedPrefetcher& operator=(const OrderedPrefetcher&) = delete;

  // Item consumed(), then advances; re-throws what produce threw for it.
  T next() {
    const auto t0 = std::chrono::steady_clock::now();
    if (threads_.empty()) {
      int64_t k;
      {
        std::lock_guard<std::mutex> lock(mu_);
        k = consumed_++;  // a failed item is skipped, as with workers
      }
      struct Timer {
        OrderedPrefetcher* self;
        std::chrono::steady_clock::time_point t0;
        ~Timer() { self->add_wait(t0); }
      } timer{this, t0};
      return produce_(k);
    }
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const int64_t k = consumed_;
      ready_cv_.wait(lock, [&] { return ready_.count(k) != 0; });
      auto it = ready_.find(k);
      slot = std::move(it->second);
      ready_.erase(it);
      ++consumed_;
      wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0).count();
    }
    space_cv_.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(*slot.value);
  }

  double wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<double>(wait_ns_) * 1e-9;
  }
  // Items next() has handed out (or re-thrown).
  int64_t consumed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return consumed_;
  }
  int32_t num_workers() const { return static_cast<int32_t>(threads_.size()); }
  int64_t capacity() const { return capacity_; }

 private:
  struct Slot {
    std::optional<T> value;
    std::exception_ptr error;
  };

  void add_wait(std::chrono::steady_clock::time_point t0) {
    std::lock_guard<std::mutex> lock(mu_);
    wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - t0).count();
  }

  void work() {
    for (;;) {
      int64_t k;
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_cv_.wait(lock, [&] { return stop_ || claimed_ < consumed_ + capacity_; });
        if (stop_) return;
        k = claimed_++;
      }
      Slot slot;
      try {
        slot.value.emplace(produce_(k));
      } catch (...) {
        slot.value.reset();
        slot.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        ready_.emplace(k, std::move(slot));
      }
      ready_cv_.notify_all();
    }
  }

  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_cv_.notify_all();
    ready_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  Produce produce_;
  const int64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable space_cv_;  // workers: room to claim, or stop
  std::condition_variable ready_cv_;  // consumer: an item became ready
  std::map<int64_t, Slot> ready_;
  int64_t claimed_ = 0;   // next index a worker will claim
  int64_t consumed_ = 0;  // next index next() returns
  int64_t wait_ns_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gt
