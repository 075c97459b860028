// Internal: how many threads a rank's layout asks of its cores, and whether that is more
// than there are (then pinning the progress thread would tie it to a core that compute
// threads also need, and spinning waits steal the time of descheduled threads).
#pragma once

#include <string>

#include <omgs/comm.hpp>

namespace omgs::detail {

struct RankLayout {
  int sharing_ranks = 1;    ///< ranks on this machine sharing this process's cpuset (incl. us)
  int local_rank = 0;       ///< this rank's index among them
  int compute_threads = 1;  ///< the caller's compute threads per rank (OpenMP), >= 1
  int cores = 1;            ///< cores in this process's cpuset
};

/// Threads the layout runs at once: per sharing rank its compute threads + the progress thread.
inline int threads_wanted(const RankLayout& l) noexcept {
  return l.sharing_ranks * (l.compute_threads + 1);
}

inline bool oversubscribed(const RankLayout& l) noexcept {
  return threads_wanted(l) > l.cores;
}

/// The back-off of the progress thread and of the owner's wait() under layout l. When l is
/// oversubscribed they neither spin nor yield: a spinning (or yielding) poll takes the core
/// of a compute thread that needs it (at 2 ranks on 2 cores the ResNet-50 layer-wise job's
/// sparsify time was 10x its CPU time, docs/select.md); they sleep at once instead.
inline IdleOptions idle_for_layout(IdleOptions idle, const RankLayout& l) noexcept {
  if (oversubscribed(l)) {
    idle.spin_iterations = 0;
    idle.yield_iterations = 0;
  }
  return idle;
}

/// "4 ranks x (2 compute threads + 1 progress thread) = 12 threads on 2 cores".
inline std::string describe(const RankLayout& l) {
  return std::to_string(l.sharing_ranks) + (l.sharing_ranks == 1 ? " rank x (" : " ranks x (") +
         std::to_string(l.compute_threads) +
         (l.compute_threads == 1 ? " compute thread" : " compute threads") +
         " + 1 progress thread) = " + std::to_string(threads_wanted(l)) + " threads on " +
         std::to_string(l.cores) + (l.cores == 1 ? " core" : " cores");
}

}  // namespace omgs::detail
