// omgs::BoundedQueue: a bounded multi-producer / multi-consumer queue without locks
// (Dmitry Vyukov's bounded MPMC design with one sequence number per slot).
//
// Guarantees
// * Capacity is a power of two fixed at construction; nothing is allocated afterwards.
// * try_push / try_pop never block, never allocate and never throw (T's copy assignment
//   must be noexcept). try_push returns false when the queue is full, try_pop when it is
//   empty. No item is lost or duplicated.
// * Any number of producers and consumers may call concurrently. Items pushed by one
//   thread are popped in the order that thread pushed them (the queue is linearizable
//   FIFO with respect to the successful index claims).
// * Progress: the operations are non-blocking in the "try" sense but the design is not
//   strictly lock-free: a producer preempted between claiming a slot and publishing it
//   makes that slot look empty to consumers (and a preempted consumer makes its slot look
//   full to producers) until it resumes. try_pop / try_push then return false; they never
//   spin on the stalled thread. omgs uses it with one consumer per queue.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include <omgs/error.hpp>

namespace omgs {

namespace detail {
/// Assumed cache-line size. 64 bytes on x86-64 and most Arm cores; a wider line only
/// costs some false sharing, never correctness. (std::hardware_destructive_interference_size
/// is avoided on purpose: GCC warns that it is ABI-unstable.)
inline constexpr std::size_t kCacheLine = 64;
}  // namespace detail

template <class T>
class BoundedQueue {
  static_assert(std::is_nothrow_default_constructible<T>::value,
                "BoundedQueue<T>: T must be nothrow default-constructible");
  static_assert(
      std::is_nothrow_copy_assignable<T>::value,
      "BoundedQueue<T>: T must be nothrow copy-assignable (try_push/try_pop are noexcept)");

 public:
  /// capacity: a power of two >= 2. Throws omgs::Error naming the bad value otherwise.
  explicit BoundedQueue(std::size_t capacity) : mask_(capacity - 1) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0 ||
        capacity > (std::size_t{1} << (sizeof(std::size_t) * 8 - 2))) {
      throw Error("omgs::BoundedQueue: capacity " + std::to_string(capacity) +
                  " is not a power of two >= 2");
    }
    slots_.reset(new Slot[capacity]);
    // Slot i is free for the producer whose claimed position is i. Relaxed: the queue is
    // not shared yet; publishing the queue object to other threads (e.g. std::thread
    // creation) provides the happens-before edge.
    for (std::size_t i = 0; i < capacity; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
    enqueue_pos_.store(0, std::memory_order_relaxed);
    dequeue_pos_.store(0, std::memory_order_relaxed);
  }

  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  /// Appends item; false if the queue is full (nothing is changed then).
  bool try_push(const T& item) noexcept {
    // Relaxed: the position is only a hint which the CAS below validates; the data
    // hand-off is synchronized through the slot's sequence number, not through the index.
    std::size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    Slot* slot;
    for (;;) {
      slot = &slots_[pos & mask_];
      // Acquire: pairs with the consumer's release store of seq = pos (slot freed), so
      // the consumer's read of the previous item happens-before our overwrite below.
      const std::size_t seq = slot->seq.load(std::memory_order_acquire);
      const std::intptr_t dif = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (dif == 0) {
        // The slot is free for position pos: claim the position. Relaxed is enough: the
        // CAS only arbitrates between producers; ordering of the payload is carried by
        // slot->seq (acquire above, release below).
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed)) {
          break;
        }
        // CAS failure reloaded pos; retry with it.
      } else if (dif < 0) {
        // The slot still holds the item from one lap ago: full.
        return false;
      } else {
        // Another producer claimed pos already; catch up.
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
    slot->value = item;
    // Release: publishes the payload write above to the consumer that acquires seq == pos+1.
    slot->seq.store(pos + 1, std::memory_order_release);
    return true;
  }

  /// Removes the oldest item into out; false if the queue is empty (out untouched).
  bool try_pop(T& out) noexcept {
    // Relaxed: hint only, validated by the CAS; see try_push.
    std::size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    Slot* slot;
    for (;;) {
      slot = &slots_[pos & mask_];
      // Acquire: pairs with the producer's release store of seq = pos+1, so its payload
      // write happens-before our read of slot->value.
      const std::size_t seq = slot->seq.load(std::memory_order_acquire);
      const std::intptr_t dif =
          static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (dif == 0) {
        // Relaxed: arbitrates between consumers only; the payload is ordered by seq.
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed)) {
          break;
        }
      } else if (dif < 0) {
        // Not yet published for this lap: empty (or a producer is mid-publish).
        return false;
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
    out = slot->value;
    // Release: our read of the payload happens-before the next lap's producer, which
    // acquires seq == pos + capacity before overwriting the slot.
    slot->seq.store(pos + mask_ + 1, std::memory_order_release);
    return true;
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

  /// Number of items, exact only while no other thread operates on the queue.
  std::size_t size_approx() const noexcept {
    // Relaxed: a statistic, no data is read on its basis.
    const std::size_t head = dequeue_pos_.load(std::memory_order_relaxed);
    const std::size_t tail = enqueue_pos_.load(std::memory_order_relaxed);
    return tail > head ? tail - head : 0;
  }

  bool empty_approx() const noexcept { return size_approx() == 0; }

 private:
  // One cache line per slot: a producer writing slot i does not invalidate the line a
  // consumer is reading in slot i-1.
  struct alignas(detail::kCacheLine) Slot {
    std::atomic<std::size_t> seq{0};
    T value{};
  };

  const std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  // The producers' and the consumers' indices live on separate cache lines (and away
  // from mask_/slots_, read by everybody) so that pushes and pops do not false-share.
  alignas(detail::kCacheLine) std::atomic<std::size_t> enqueue_pos_{0};
  // (The class is 64-byte aligned, so its size rounds up and dequeue_pos_ keeps its line.)
  alignas(detail::kCacheLine) std::atomic<std::size_t> dequeue_pos_{0};
};

}  // namespace omgs
