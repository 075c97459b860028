// Internal: the one back-off of every polling loop in omgs (the progress thread idling,
// the owner's wait(), the runtime's submit, the inline drain). A loop that found nothing
// to do calls pause(): it spins a little, then yields, then sleeps with a doubling period
// bounded by IdleOptions::max_sleep_s. On a loaded machine (ranks x threads > cores) the
// spinning phase is short and the sleeping thread leaves its core to the threads that
// have work, so neither the progress thread nor the owner starves the other.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

#include <omgs/comm.hpp>

// A pause in busy-wait loops.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OMGS_CPU_RELAX() _mm_pause()
#else
#define OMGS_CPU_RELAX() ((void)0)
#endif

namespace omgs::detail {

class Backoff {
 public:
  explicit Backoff(const IdleOptions& idle) noexcept
      : spin_(std::max(0, idle.spin_iterations)),
        yield_(std::max(0, idle.yield_iterations)),
        min_sleep_(std::max(0.0, idle.sleep_s)),
        max_sleep_(std::max(min_sleep_, idle.max_sleep_s)),
        sleep_(min_sleep_) {}

  /// Something happened: the next pause() spins again.
  void reset() noexcept {
    count_ = 0;
    sleep_ = min_sleep_;
  }

  /// One empty poll: spin, yield, or sleep (the period doubles up to max_sleep_s). With
  /// `in_flight` (MPI has operations that only advance when polled) the sleep stays at
  /// sleep_s: a longer one would stall every round of a non-blocking collective.
  void pause(bool in_flight = false) noexcept {
    if (count_ < spin_) {
      ++count_;
      OMGS_CPU_RELAX();
    } else if (count_ < spin_ + yield_) {
      ++count_;
      std::this_thread::yield();
    } else if (in_flight) {
      std::this_thread::sleep_for(std::chrono::duration<double>(min_sleep_));
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(sleep_));
      sleep_ = std::min(max_sleep_, 2 * sleep_);
    }
  }

  /// Whether pause() has reached the sleeping phase, and the next idle sleep (for tests).
  bool sleeping() const noexcept { return count_ >= spin_ + yield_; }
  double next_sleep_s() const noexcept { return sleep_; }

 private:
  int spin_, yield_;
  double min_sleep_, max_sleep_, sleep_;
  int count_ = 0;
};

}  // namespace omgs::detail
