// hwloc pinning of the progress thread.
#include "pinning.hpp"

#if OMGS_HAVE_HWLOC
#include <hwloc.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace omgs::detail {

namespace {

std::string bitmap_list(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "?";
  std::string out(text);
  std::free(text);
  return out;
}

/// RAII for hwloc bitmaps.
struct Bitmap {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(set); }
  Bitmap() = default;
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
};

std::atomic<bool> g_bind_warned{false};

}  // namespace

struct Pinner::Impl {
  hwloc_topology_t topo = nullptr;
};

Pinner::Pinner() : impl_(new Impl) {
  if (hwloc_topology_init(&impl_->topo) != 0 || hwloc_topology_load(impl_->topo) != 0) {
    if (impl_->topo != nullptr) hwloc_topology_destroy(impl_->topo);
    delete impl_;
    throw Error("omgs::ProgressEngine: hwloc could not load the machine topology");
  }
}

Pinner::~Pinner() {
  hwloc_topology_destroy(impl_->topo);
  delete impl_;
}

/// PinPolicy::none and PinPolicy::pu: no choice to make, only a check.
static int choose_explicit(hwloc_topology_t topo, const PinOption& option, const std::string& what,
                           std::string& note) {
  if (option.policy == PinPolicy::none) {
    note = "unpinned: pinning disabled (" + what + " = none)";
    return -1;
  }
  if (option.pu < 0 ||
      hwloc_get_pu_obj_by_os_index(topo, static_cast<unsigned>(option.pu)) == nullptr) {
    throw Error(what + " = " + std::to_string(option.pu) +
                ": this machine has no PU with that OS index (PUs: " +
                bitmap_list(hwloc_topology_get_complete_cpuset(topo)) + ")");
  }
  note = "PU " + std::to_string(option.pu) + " requested by " + what;
  return option.pu;
}

/// The process's binding, restricted to what the OS allows.
static void process_cpuset(hwloc_topology_t topo, hwloc_bitmap_t out) {
  if (hwloc_get_cpubind(topo, out, HWLOC_CPUBIND_PROCESS) != 0 || hwloc_bitmap_iszero(out)) {
    hwloc_bitmap_copy(out, hwloc_topology_get_allowed_cpuset(topo));
  }
  hwloc_bitmap_and(out, out, hwloc_topology_get_allowed_cpuset(topo));
}

int Pinner::process_cores() {
  Bitmap process;
  process_cpuset(impl_->topo, process.set);
  const int ncores = hwloc_get_nbobjs_by_type(impl_->topo, HWLOC_OBJ_CORE);
  int n = 0;
  for (int c = 0; c < ncores; ++c) {
    hwloc_obj_t core = hwloc_get_obj_by_type(impl_->topo, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
    if (core != nullptr && hwloc_bitmap_intersects(core->cpuset, process.set)) ++n;
  }
  return n > 0 ? n : 1;
}

bool Pinner::process_unbound() {
  Bitmap process;
  process_cpuset(impl_->topo, process.set);
  return hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(impl_->topo), process.set) != 0;
}

int Pinner::choose(const PinOption& option, const std::vector<int>& preferred,
                   const std::string& what, const RankLayout& layout, std::string& note) {
  hwloc_topology_t topo = impl_->topo;
  if (option.policy != PinPolicy::automatic) return choose_explicit(topo, option, what, note);
  if (oversubscribed(layout)) {
    // A pinned thread could not move off a core that compute threads (or other ranks)
    // need, nor to one that frees up: the OS scheduler places it better.
    note = "unpinned: auto: oversubscribed, " + describe(layout);
    return -1;
  }

  Bitmap process;
  process_cpuset(topo, process.set);

  // Where the calling thread runs: its own binding when narrower than the process's,
  // else the PU it last ran on. Whole cores of those PUs are excluded.
  Bitmap caller;
  if (hwloc_get_cpubind(topo, caller.set, HWLOC_CPUBIND_THREAD) != 0 ||
      hwloc_bitmap_isincluded(process.set, caller.set)) {
    if (hwloc_get_last_cpu_location(topo, caller.set, HWLOC_CPUBIND_THREAD) != 0) {
      hwloc_bitmap_zero(caller.set);
    }
  }
  Bitmap excluded;
  hwloc_bitmap_copy(excluded.set, caller.set);
  const int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  for (int c = 0; c < ncores; ++c) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
    if (core != nullptr && hwloc_bitmap_intersects(core->cpuset, caller.set)) {
      hwloc_bitmap_or(excluded.set, excluded.set, core->cpuset);
    }
  }

  Bitmap preferred_set;
  for (int pu : preferred) {
    if (pu >= 0) hwloc_bitmap_set(preferred_set.set, static_cast<unsigned>(pu));
  }
  hwloc_bitmap_and(preferred_set.set, preferred_set.set, process.set);

  const std::string caller_text = bitmap_list(caller.set);
  auto pick_from = [&](hwloc_const_bitmap_t candidates, const char* label) -> int {
    Bitmap free_pus;
    // Ranks sharing the cpuset take different cores: the local_rank-th free one.
    int skip = layout.sharing_ranks > 1 ? layout.local_rank : 0;
    // Last core first: the last core of a socket is the one MPI launchers and OpenMP
    // runtimes hand out last.
    for (int c = ncores - 1; c >= 0; --c) {
      hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
      if (core == nullptr) continue;
      hwloc_bitmap_and(free_pus.set, core->cpuset, candidates);
      hwloc_bitmap_andnot(free_pus.set, free_pus.set, excluded.set);
      if (!hwloc_bitmap_iszero(free_pus.set) && skip-- == 0) {
        const int pu = hwloc_bitmap_first(free_pus.set);
        note = std::string("auto: last core free of the calling thread (PUs ") + caller_text +
               ") in the " + label + " (" + bitmap_list(candidates) + "): PU " +
               std::to_string(pu) + " (core L#" + std::to_string(c) + ")";
        return pu;
      }
    }
    // No free core: a PU the caller does not run on (an SMT sibling).
    hwloc_bitmap_andnot(free_pus.set, candidates, caller.set);
    if (!hwloc_bitmap_iszero(free_pus.set)) {
      const int pu = hwloc_bitmap_last(free_pus.set);
      note = std::string("auto: no free core in the ") + label + " (" + bitmap_list(candidates) +
             "), PU " + std::to_string(pu) + " shares a core with the calling thread";
      return pu;
    }
    return -1;
  };
  if (!hwloc_bitmap_iszero(preferred_set.set)) {
    const int pu = pick_from(preferred_set.set, "preferred PUs (near the GPU)");
    if (pu >= 0) return pu;
  }
  const int pu = pick_from(process.set, "process cpuset");
  if (pu >= 0) return pu;
  note = "unpinned: auto found no PU free of the calling thread (PUs " + caller_text +
         ") in the process cpuset (" + bitmap_list(process.set) + ")";
  return -1;
}

bool Pinner::bind_current_thread(int pu, std::string& note) {
  Bitmap set;
  hwloc_bitmap_only(set.set, static_cast<unsigned>(pu));
  if (hwloc_set_cpubind(impl_->topo, set.set, HWLOC_CPUBIND_THREAD) == 0) return true;
  const int err = errno;
  const std::string reason = "binding to PU " + std::to_string(pu) +
                             " failed (hwloc_set_cpubind: " + std::strerror(err) +
                             "); progress thread unpinned";
  note += "; " + reason;
  if (!g_bind_warned.exchange(true)) {
    std::fprintf(stderr, "omgs: warning: %s\n", reason.c_str());
  }
  return false;
}

}  // namespace omgs::detail

#else  // built with -DOMGS_ENABLE_HWLOC=OFF

#include <thread>

#include "pinning.hpp"

namespace omgs::detail {

struct Pinner::Impl {};
Pinner::Pinner() : impl_(nullptr) {}
Pinner::~Pinner() = default;

int Pinner::process_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

bool Pinner::process_unbound() {
  return true;
}

int Pinner::choose(const PinOption& option, const std::vector<int>&, const std::string& what,
                   const RankLayout&, std::string& note) {
  note = option.policy == PinPolicy::none
             ? "unpinned: pinning disabled (" + what + " = none)"
             : "unpinned: omgs was built without hwloc (-DOMGS_ENABLE_HWLOC=OFF)";
  return -1;
}

bool Pinner::bind_current_thread(int, std::string& note) {
  note += "; omgs was built without hwloc";
  return false;
}

}  // namespace omgs::detail
#endif
