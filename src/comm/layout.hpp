// Internal: how many threads a rank's layout asks of its cores, and whether that is more
// than there are (then pinning the progress thread would tie it to a core that compute
// threads also need, and spinning waits steal the time of descheduled threads).
#pragma once

#include <string>

namespace omgs::detail {

struct RankLayout {
  int sharing_ranks = 1;    ///< ranks on this node sharing this process's cpuset (incl. us)
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

/// "4 ranks x (2 compute threads + 1 progress thread) = 12 threads on 2 cores".
inline std::string describe(const RankLayout& l) {
  return std::to_string(l.sharing_ranks) + (l.sharing_ranks == 1 ? " rank x (" : " ranks x (") +
         std::to_string(l.compute_threads) +
         (l.compute_threads == 1 ? " compute thread" : " compute threads") +
         " + 1 progress thread) = " + std::to_string(threads_wanted(l)) + " threads on " +
         std::to_string(l.cores) + (l.cores == 1 ? " core" : " cores");
}

}  // namespace omgs::detail
