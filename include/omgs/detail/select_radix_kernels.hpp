// Internal part of module select: the kernels of the radix path (full histogram passes,
// compaction of the threshold bucket, resolve, pick and merge; docs/select.md). The path
// that runs them is detail/select_radix.hpp. Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include <omgs/detail/select_source.hpp>

namespace omgs {
namespace detail {

/// Histogram pass over the whole input: counts digit (key >> shift) & mask of the entries
/// whose key >> filter_shift equals filter_value (filter_shift == 32: every entry), one
/// scratch histogram per team, merged with one atomic per non-empty bin and team. Level 1
/// also counts non-finite entries.
template <class Exec, bool Feedback>
struct SelectHistogram {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  using ScratchU32 =
      Kokkos::View<std::uint32_t*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;

  SelectSource<Mem, Feedback> src;
  Kokkos::View<std::uint32_t*, Mem> hist;
  Kokkos::View<std::uint64_t*, Mem> nonfinite;
  std::int64_t n = 0;
  std::int64_t chunk = 0;
  int shift = 0;
  std::uint32_t mask = 0;
  int filter_shift = 32;
  std::uint32_t filter_value = 0;
  int bins = 0;

  KOKKOS_INLINE_FUNCTION bool keep(std::uint32_t key) const {
    return filter_shift >= 32 || (key >> filter_shift) == filter_value;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    ScratchU32 h(team.team_scratch(0), bins);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins), [&](const int b) { h(b) = 0; });
    team.team_barrier();
    const std::int64_t begin = static_cast<std::int64_t>(team.league_rank()) * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    std::uint64_t bad = 0;
    if (team.team_size() == 1) {
      // CPU backends run one thread per team: plain increments, no atomics.
      for (std::int64_t i = begin; i < end; ++i) {
        const std::uint32_t key = magnitude_key(src(i));
        bad += key_is_nonfinite(key) ? 1 : 0;
        if (keep(key)) ++h((key >> shift) & mask);
      }
    } else {
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, begin, end),
          [&](const std::int64_t i, std::uint64_t& nb) {
            const std::uint32_t key = magnitude_key(src(i));
            nb += key_is_nonfinite(key) ? 1 : 0;
            if (keep(key)) Kokkos::atomic_add(&h((key >> shift) & mask), std::uint32_t(1));
          },
          bad);
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins), [&](const int b) {
      if (h(b) != 0) Kokkos::atomic_add(&hist(b), h(b));
    });
    if (nonfinite.extent(0) > 0) {
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        if (bad != 0) Kokkos::atomic_add(&nonfinite(0), bad);
      });
    }
  }
};

/// Pass 2 of the fast path: one scan in index order writes the certainly selected entries
/// (top digit above the threshold bucket b1) to sure_*, and the threshold bucket's entries to
/// cand_*, both in index order. The feedback form writes residual = (sure ? 0 : acc).
/// Scan value: low 32 bits count sure entries, high 32 bits count candidates.
template <class Exec, bool Feedback>
struct SelectCompact {
  using Mem = typename Exec::memory_space;
  using value_type = std::uint64_t;
  SelectSource<Mem, Feedback> src;
  std::uint32_t b1 = 0;
  Kokkos::View<std::uint32_t*, Mem> sure_index, cand_index;
  Kokkos::View<float*, Mem> sure_value, cand_value;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, value_type& update,
                                         const bool final) const {
    const float v = src(i);
    const std::uint32_t digit = magnitude_key(v) >> select_shift1;
    const bool sure = digit > b1;
    const bool cand = digit == b1;
    if (final) {
      if (sure) {
        const std::uint64_t p = update & 0xffffffffu;
        sure_index(p) = static_cast<std::uint32_t>(i);
        sure_value(p) = v;
      } else if (cand) {
        const std::uint64_t p = update >> 32;
        cand_index(p) = static_cast<std::uint32_t>(i);
        cand_value(p) = v;
      }
      if (Feedback) src.out(i) = sure ? 0.0f : v;
    }
    update += (static_cast<std::uint64_t>(cand) << 32) | static_cast<std::uint64_t>(sure);
  }
};

/// Finds, in the host histogram h[0, bins), the bucket b holding the k-th largest entry
/// (1 <= k <= total): above = sum of h[b+1 ..] < k <= above + h[b].
template <class HostView>
inline int find_bucket_host(const HostView& h, int bins, std::uint64_t k, std::uint64_t& above) {
  std::uint64_t cum = 0;
  for (int b = bins - 1; b >= 0; --b) {
    if (cum + h(b) >= k) {
      above = cum;
      return b;
    }
    cum += h(b);
  }
  above = cum;
  return 0;  // unreachable for 1 <= k <= total
}

/// One team resolves the last two digits over the m candidates (all of top digit b1):
/// writes state(0) = exact threshold key T and state(1) = t, the number of entries with
/// key == T to take (lowest indices first); k_rem = k - (entries above the bucket).
template <class Exec>
struct SelectResolveCandidates {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  using ScratchU32 =
      Kokkos::View<std::uint32_t*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  Kokkos::View<const float*, Mem> cand_value;
  Kokkos::View<std::uint32_t*, Mem> state;
  std::int64_t m = 0;
  std::uint32_t b1 = 0;
  std::uint32_t k_rem = 0;

  static std::size_t scratch_bytes() {
    return ScratchU32::shmem_size(select_bins2) + ScratchU32::shmem_size(select_bins3) +
           ScratchU32::shmem_size(4);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    ScratchU32 h2(team.team_scratch(0), select_bins2);
    ScratchU32 h3(team.team_scratch(0), select_bins3);
    ScratchU32 shared(team.team_scratch(0), 4);
    const bool serial = team.team_size() == 1;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, select_bins2), [&](const int b) {
      h2(b) = 0;
      if (b < select_bins3) h3(b) = 0;
    });
    team.team_barrier();
    if (serial) {
      for (std::int64_t j = 0; j < m; ++j)
        ++h2((magnitude_key(cand_value(j)) >> select_shift2) & 0x7ffu);
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m), [&](const std::int64_t j) {
        Kokkos::atomic_add(&h2((magnitude_key(cand_value(j)) >> select_shift2) & 0x7ffu),
                           std::uint32_t(1));
      });
    }
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      std::uint32_t cum = 0, b = select_bins2 - 1;
      for (int c = select_bins2 - 1; c >= 0; --c) {
        b = static_cast<std::uint32_t>(c);
        if (cum + h2(c) >= k_rem) break;
        cum += h2(c);
      }
      shared(0) = b;
      shared(1) = k_rem - cum;
    });
    team.team_barrier();
    const std::uint32_t b2 = shared(0);
    if (serial) {
      for (std::int64_t j = 0; j < m; ++j) {
        const std::uint32_t key = magnitude_key(cand_value(j));
        if (((key >> select_shift2) & 0x7ffu) == b2) ++h3(key & 0x1ffu);
      }
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m), [&](const std::int64_t j) {
        const std::uint32_t key = magnitude_key(cand_value(j));
        if (((key >> select_shift2) & 0x7ffu) == b2)
          Kokkos::atomic_add(&h3(key & 0x1ffu), std::uint32_t(1));
      });
    }
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      const std::uint32_t need = shared(1);
      std::uint32_t cum = 0, b = select_bins3 - 1;
      for (int c = select_bins3 - 1; c >= 0; --c) {
        b = static_cast<std::uint32_t>(c);
        if (cum + h3(c) >= need) break;
        cum += h3(c);
      }
      state(0) = (b1 << select_shift1) | (b2 << select_shift2) | b;
      state(1) = need - cum;
    });
  }
};

/// Selection scan against the exact threshold: key > T is taken, key == T is taken while
/// fewer than t ties were seen at lower indices. Scan value: low 32 bits count entries
/// above T, high 32 bits count ties; the output position is above + min(ties, t).
/// Over the candidates (FromState: T and t are read from state) it writes sel_*; over the
/// full input (slow path) it writes the outputs and, in the feedback form, the residual.
template <class Exec, bool Feedback, bool Candidates>
struct SelectFinalScan {
  using Mem = typename Exec::memory_space;
  using value_type = std::uint64_t;
  SelectSource<Mem, Feedback> src;                     // full input (slow path)
  Kokkos::View<const std::uint32_t*, Mem> cand_index;  // candidates (fast path)
  Kokkos::View<const float*, Mem> cand_value;
  Kokkos::View<const std::uint32_t*, Mem> state;
  std::uint32_t threshold = 0, ties = 0;  // slow path
  Kokkos::View<std::uint32_t*, Mem> out_index;
  Kokkos::View<float*, Mem> out_value;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j, value_type& update,
                                         const bool final) const {
    const float v = Candidates ? cand_value(j) : src(j);
    const std::uint32_t key = magnitude_key(v);
    const std::uint32_t T = Candidates ? state(0) : threshold;
    const bool above = key > T;
    const bool tie = key == T;
    if (final) {
      const std::uint64_t a = update & 0xffffffffu;
      const std::uint64_t seen = update >> 32;
      const std::uint64_t t = Candidates ? state(1) : ties;
      const bool take = above || (tie && seen < t);
      if (take) {
        const std::uint64_t p = a + (seen < t ? seen : t);
        out_index(p) = Candidates ? cand_index(j) : static_cast<std::uint32_t>(j);
        out_value(p) = v;
      }
      if (Feedback && !Candidates) src.out(j) = take ? 0.0f : v;
    }
    update += (static_cast<std::uint64_t>(tie) << 32) | static_cast<std::uint64_t>(above);
  }
};

/// Merges the two index-sorted lists sure[0, n_sure) and sel[0, n_sel) into the output;
/// the feedback form zeroes the residual at the selected candidates (the sure entries were
/// zeroed by the compaction pass).
template <class Exec, bool Feedback>
struct SelectMerge {
  using Mem = typename Exec::memory_space;
  Kokkos::View<const std::uint32_t*, Mem> sure_index, sel_index;
  Kokkos::View<const float*, Mem> sure_value, sel_value;
  std::uint64_t n_sure = 0, n_sel = 0;
  Kokkos::View<std::uint32_t*, Mem> out_index;
  Kokkos::View<float*, Mem> out_value;
  Kokkos::View<float*, Mem> residual;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t jj) const {
    const std::uint64_t j = static_cast<std::uint64_t>(jj);
    if (j < n_sure) {
      const std::uint32_t idx = sure_index(j);
      const std::uint64_t p = j + count_less(sel_index, n_sel, idx);
      out_index(p) = idx;
      out_value(p) = sure_value(j);
    } else {
      const std::uint64_t s = j - n_sure;
      const std::uint32_t idx = sel_index(s);
      const std::uint64_t p = s + count_less(sure_index, n_sure, idx);
      out_index(p) = idx;
      out_value(p) = sel_value(s);
      if (Feedback) residual(idx) = 0.0f;
    }
  }
};

/// k == 0 in the feedback form: out = residual + grad, nothing selected (out may be the
/// residual itself).
template <class Exec>
struct SelectAccumulate {
  using Mem = typename Exec::memory_space;
  SelectSource<Mem, true> src;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const { src.out(i) = src(i); }
};

}  // namespace detail
}  // namespace omgs
