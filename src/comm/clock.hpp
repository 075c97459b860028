// Internal: the one clock of omgs (runtime timestamps, engine statistics, every bounded wait).
#pragma once

#include <chrono>

namespace omgs::detail {

using Clock = std::chrono::steady_clock;

/// Seconds on the steady clock (since its epoch); every omgs timestamp uses it.
inline double now_s() noexcept {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// The time point `seconds` from now, for bounded waits.
inline Clock::time_point deadline_after(double seconds) noexcept {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace omgs::detail
