// Internal: the one clock of omgs (runtime timestamps, engine statistics, every bounded wait).
#pragma once

#include <chrono>
#include <ctime>

namespace omgs::detail {

using Clock = std::chrono::steady_clock;

/// Seconds on the steady clock (since its epoch); every omgs timestamp uses it.
inline double now_s() noexcept {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID; where a platform has no
/// such clock, the wall clock): beside now_s() it tells a step's own work from the time
/// other threads held its core. Other threads of a parallel back-end are not counted.
inline double thread_cpu_s() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#endif
  return now_s();
}

/// The time point `seconds` from now, for bounded waits.
inline Clock::time_point deadline_after(double seconds) noexcept {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace omgs::detail
