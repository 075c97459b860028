// Internal: hwloc-based choice and binding of the progress thread's PU.
#pragma once

#include <string>
#include <vector>

#include <omgs/comm.hpp>

#include "comm/layout.hpp"

namespace omgs::detail {

/// Owns an hwloc topology loaded at construction. choose() runs on the thread that
/// creates the engine (it needs to know where that thread runs); bind_current_thread()
/// runs on the progress thread itself.
class Pinner {
 public:
  Pinner();
  ~Pinner();
  Pinner(const Pinner&) = delete;
  Pinner& operator=(const Pinner&) = delete;

  /// The OS index of the PU to bind to, or -1 (then note says why). Throws omgs::Error
  /// when an explicit PU does not exist; `what` names the option or variable. Automatic
  /// pinning leaves the thread unpinned when `layout` oversubscribes the cores, and else
  /// gives the sharing ranks different cores (local_rank-th free core from the last).
  int choose(const PinOption& option, const std::vector<int>& preferred, const std::string& what,
             const RankLayout& layout, std::string& note);

  /// Cores in the process's cpuset (>= 1), and whether that cpuset is the whole machine
  /// (then the launcher did not bind ranks apart: every rank on the node shares it).
  int process_cores();
  bool process_unbound();

  /// Binds the calling thread to PU pu. On failure returns false, appends the reason to
  /// note and prints a warning once per process.
  bool bind_current_thread(int pu, std::string& note);

 private:
  struct Impl;
  // Unused without hwloc (-DOMGS_ENABLE_HWLOC=OFF), where clang warns of a private field
  // that is never read.
  [[maybe_unused]] Impl* impl_;
};

}  // namespace omgs::detail
