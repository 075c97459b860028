// Internal part of module select: what one call of the one-read feedback form
// (TopkSelector::select_with_feedback(grad, residual_in, residual_out, ...), the form the
// runtime calls) launches and moves on the sampled path, the path of every group above
// select_small_n entries at the densities omgs is used with. The GPU top-k cost model of the
// planner (docs/scale.md, examples/perf/gpu_topk_*.json) is built from these counts, and
// tests/select/test_select_cost.cpp checks that the kernels launched are exactly the passes
// listed here: adding a pass without listing it (and its bytes) fails that test.
// Pure C++17, no Kokkos: the plan module's tests read it too.
#pragma once

#include <cstddef>

namespace omgs {
namespace detail {

/// One kernel launch of the sampled one-read path: its Kokkos label and the DRAM bytes it
/// moves per input entry (n) and per selected entry (k). Counted from the kernels' code
/// (select_sampled.hpp, select.hpp), as a GPU runs them (coalesced 4-byte accesses; a
/// scattered 4-byte store costs a 32-byte sector).
struct SelectPassCost {
  const char* label;
  double bytes_per_entry;
  double bytes_per_selected;
};

/// The launches, in order. Per entry only the bracket pass counts: it reads grad and
/// residual_in (4 + 4 bytes) and writes residual_out = acc (4 bytes); on a GPU its team scan
/// calls the body twice, but the second read of a chunk hits L1. The sample gather and the
/// sample kernel touch s <= 16384 entries whatever n is (a per-call cost, not per entry).
/// Per selected entry (with m = k candidates; the sample's slack makes m 1-4 k, under 3% of
/// the per-entry bytes at density <= 0.01): the bracket pass writes each candidate's index
/// and value (8), the one-team resolve reads them (8) and writes the output pairs (8), and
/// the zero pass reads the index (4) and stores a scattered zero (a 32-byte sector).
inline constexpr SelectPassCost select_one_read_passes[] = {
    {"omgs::select::sample_gather", 0.0, 0.0}, {"omgs::select::sample", 0.0, 0.0},
    {"omgs::select::bracket", 12.0, 8.0},      {"omgs::select::candidates", 0.0, 16.0},
    {"omgs::select::zero", 0.0, 36.0},
};
/// Host round trips per call: the per-team candidate and non-finite counts are read back
/// (deep_copy + fence) to decide between the resolve and the radix fallback.
inline constexpr int select_one_read_round_trips = 1;

/// Kernel launches per call of the sampled one-read path.
constexpr int select_one_read_launches() {
  return static_cast<int>(sizeof(select_one_read_passes) / sizeof(select_one_read_passes[0]));
}
/// DRAM bytes per input entry of one call (the model's slope numerator).
constexpr double select_one_read_bytes_per_entry() {
  double b = 0.0;
  for (const SelectPassCost& p : select_one_read_passes) b += p.bytes_per_entry;
  return b;
}
/// DRAM bytes per selected entry of one call.
constexpr double select_one_read_bytes_per_selected() {
  double b = 0.0;
  for (const SelectPassCost& p : select_one_read_passes) b += p.bytes_per_selected;
  return b;
}

/// What the runtime adds around each call (src/runtime/runtime.cpp, sparsify): the pack
/// kernel (reads the k indices and values, writes k pairs: 16 bytes per selected entry) and
/// the fence before MPI sees the pairs (one more host round trip).
inline constexpr int sparsify_extra_launches = 1;
inline constexpr int sparsify_extra_round_trips = 1;
inline constexpr double sparsify_extra_bytes_per_selected = 16.0;

}  // namespace detail
}  // namespace omgs
