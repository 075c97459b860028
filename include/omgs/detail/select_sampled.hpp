// Internal part of module select: the kernels of the small-n path and of the sampled path
// (docs/select.md). Small n: one team does the whole selection. Sampled path: a one-team
// kernel estimates a lower key bound from a sample (gathered in blocks of 16 entries by a
// parallel kernel), ONE fused pass over the input
// counts the non-finite entries and compacts the entries at or above the bound into
// per-team segments of a candidate buffer, a one-team kernel resolves the exact threshold
// on the candidates and writes the output, and (feedback form) one pass writes the new
// residual. Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

#include <omgs/detail/select_block_mask.hpp>
#include <omgs/detail/select_pick.hpp>
#include <omgs/detail/select_range.hpp>
#include <omgs/detail/select_source.hpp>
#include <omgs/detail/select_team.hpp>

namespace omgs {
namespace detail {

/// Inputs up to this size take the one-team path (one launch, one host read-back).
constexpr std::size_t select_small_n = 8192;
/// Largest sample of the sampled path.
constexpr std::int64_t select_sample_max = 16384;

/// Size of the sample for n entries: n / 256 within [1024, 16384], at most n / 4, in whole
/// blocks (a multiple of select_sample_block). A sampled entry costs ~30 instructions in the
/// one-team sample kernel and each block a cache miss per stream, so a fixed 16384 cost
/// mid-size groups (2^13 to 2^22 entries, most of a CNN's layers) as much as their bracket
/// pass; a smaller sample only widens the bracket (more candidates for the resolve, which
/// reads them from cache).
constexpr std::int64_t select_sample_size(std::int64_t n) {
  const std::int64_t s =
      n / 256 < 1024 ? 1024 : (n / 256 > select_sample_max ? select_sample_max : n / 256);
  const std::int64_t capped = s < n / 4 ? s : n / 4;
  return capped - capped % select_sample_block;
}
/// Sample rank of the sampled path's lower bound for k of n entries and a sample of s: the
/// expected rank of the k-th entry plus 6 standard deviations of an independent sample (the
/// blocks of 16 entries are not independent where large entries cluster: 4 had missed 1 of
/// 16 calls of row-scaled data at 4 M entries, d = 0.01), so that fewer than k entries lie
/// at or above the bound, or more than the candidate buffer holds, very rarely.
inline std::int64_t select_bound_rank(std::size_t k, std::int64_t s, std::int64_t n) {
  const double q = static_cast<double>(k) * static_cast<double>(s) / static_cast<double>(n);
  return static_cast<std::int64_t>(q + 6.0 * std::sqrt(q) + 16.0);
}
/// From this size on the one-read feedback form streams the new residual past the caches on
/// host backends (non-temporal stores: no read of the line first, no eviction of the
/// inputs). Smaller calls write through the cache. Where the threshold belongs was measured
/// both ways on two VMs (docs/select.md, "Sampled path"): 2^18 won there on one (layer-wise
/// ResNet-50 25.9 -> 23.1 ms against 2^22), 2^22 on the other, in one process (layer-wise /
/// one group 1.31 -> 1.13) and in the 2-rank runtime (sparsify CPU time 1.31-1.41 ->
/// 1.00-1.17), even at 4 ranks (1.27 -> 1.26, medians of 5 jobs). 2^22: the later machine.
constexpr std::int64_t select_stream_min = std::int64_t(1) << 22;
/// Size of the resolve's gather buffer: its threshold bin is copied there when it fits.
/// The sample is gathered there first (SelectSampleGather), so it holds the largest sample.
constexpr std::size_t select_bucket_cap = 16384;
static_assert(select_bucket_cap >= std::size_t(select_sample_max), "the sample fits the bucket");
/// state(4): the lower key bound of the sampled path (candidates have key >= bound).
constexpr int select_state_bound = 4;

/// One-team kernels. Mode small: the whole selection over List = DirectList (non-finite
/// count to nonfinite(0), outputs, and the full residual in the feedback form). Mode sample:
/// state(4) = the key of the need-th largest sample entry (at most 0x7f800000, so every
/// non-finite entry is at or above it). Mode resolve: threshold and output over the
/// candidates; state(0) = T, state(1) = t, state(2) = index of the last tie taken. W: what
/// the pick writes to the residual (small, in-place feedback: all of it; small over an
/// AccList and resolve in the out-of-place form: 0 at the selected entries).
enum class OneTeamMode { small, sample, resolve };

template <class Exec, class List, PickResidual W, OneTeamMode Mode>
struct SelectOneTeam {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  static constexpr OneTeamMode mode = Mode;
  List list;
  std::uint32_t need = 0;  // k (small: 0 allowed), or the sample rank
  PickOutput<Mem> out;
  Kokkos::View<std::uint64_t*, Mem> nonfinite;
  Kokkos::View<float*, Mem> gather;  // the threshold bucket, when it fits

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    SelectScratchU32<Exec> h(team.team_scratch(0), select_bins1);
    SelectScratchU32<Exec> shared(team.team_scratch(0), 4);
    std::uint32_t T = 0xffffffffu, t = 0;
    std::uint64_t bad = 0;
    if (Mode == OneTeamMode::resolve && team.team_size() == 1) {
      // Host teams: levels over the candidates' key range (select_range.hpp).
      host_range_kth_key(list, h, out.state(select_state_bound), need, gather, T, t);
    } else {
      team_kth_key(team, list, h, shared, need == 0 ? 1u : need, gather, T, t, bad);
    }
    if constexpr (Mode == OneTeamMode::sample) {
      Kokkos::single(Kokkos::PerTeam(team),
                     [&]() { out.state(select_state_bound) = T < 0x7f800000u ? T : 0x7f800000u; });
    } else {
      if (Mode == OneTeamMode::small) {
        Kokkos::single(Kokkos::PerTeam(team), [&]() { nonfinite(0) = bad; });
        if (bad != 0) return;
        if (need == 0) T = 0xffffffffu, t = 0;  // nothing above, no ties: select nothing
      }
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        out.state(0) = T;
        out.state(1) = t;
      });
      team_pick<W>(team, list, shared, T, t, out);
    }
  }
};

/// The sampled path's first kernel: the sample copied to a contiguous buffer (one entry per
/// thread, so a GPU reads each block coalesced; host threads prefetch four blocks ahead).
/// Each block is a cache miss: this way every thread (on a GPU, the whole device) shares
/// them, and the one-team sample kernel then reads the buffer from cache.
template <class Exec, bool Feedback>
struct SelectSampleGather {
  using Mem = typename Exec::memory_space;
  SampleList<Mem, Feedback> sample;
  Kokkos::View<float*, Mem> buf;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t p) const {
    if (p % select_sample_block == 0) prefetch_entry(sample, p + select_sample_prefetch_ahead);
    buf(p) = sample.value(p);
  }
};

/// The fused pass of the sampled path: team r scans its chunk of the input once, counts the
/// non-finite entries and the entries with key >= bound, and writes the first `stride` of
/// the latter, in index order, to its segment [r * stride, (r + 1) * stride) of the
/// candidate buffer. counts(2 r) = candidates seen (more than stride - 1: the bracket missed),
/// counts(2 r + 1) = non-finite entries. Store (the out-of-place feedback form): the pass
/// also writes src.out = acc for every entry (the resolve step then zeroes the selected
/// ones); otherwise nothing else is written.
template <class Exec, bool Feedback, bool Store = false>
struct SelectBracketPass {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  SelectSource<Mem, Feedback> src;
  Kokkos::View<const std::uint32_t*, Mem> state;
  Kokkos::View<std::uint32_t*, Mem> counts, cand_index;
  Kokkos::View<float*, Mem> cand_value;
  std::int64_t n = 0, chunk = 0, stride = 0;

  /// Branch-free compaction step (host teams): the entry is written to the next free slot
  /// and kept only if it is a candidate. Slot stride - 1 is a spill slot, so a segment holds
  /// at most stride - 1 candidates (more: the bracket missed).
  KOKKOS_FORCEINLINE_FUNCTION void keep(std::int64_t i, float v, bool cand, std::int64_t base,
                                        std::int64_t& c) const {
    const std::int64_t p = c < stride - 1 ? c : stride - 1;
    cand_index(base + p) = static_cast<std::uint32_t>(i);
    cand_value(base + p) = v;
    c += cand ? 1 : 0;
  }

  /// Entries [b, e) one by one (the ends of a team's chunk; Store: writes src.out too).
  KOKKOS_INLINE_FUNCTION void scan_entries(std::int64_t b, std::int64_t e, std::uint32_t bound,
                                           std::int64_t base, std::int64_t& c,
                                           std::uint64_t& bad) const {
    for (std::int64_t i = b; i < e; ++i) {
      const float v = src(i);
      if (Store) src.out(i) = v;
      const std::uint32_t key = magnitude_key(v);
      bad += key_is_nonfinite(key) ? 1 : 0;
      keep(i, v, key >= bound, base, c);
    }
  }

  /// Blocks of 32 from i while they fit before e: the candidate mask of each (vectorized;
  /// Store: src.out written, streamed when Stream); blocks without a candidate are skipped,
  /// the set bits of the others visited in index order. Returns where the blocks end.
  template <bool Stream>
  KOKKOS_INLINE_FUNCTION std::int64_t scan_blocks(std::int64_t i, std::int64_t e,
                                                  std::uint32_t bound, std::int64_t base,
                                                  std::int64_t& c, std::uint64_t& bad) const {
    const float* const res = Feedback ? src.residual.data() : nullptr;
    float* const out = Store ? src.out.data() : nullptr;
    for (; i + 32 <= e; i += 32) {
      for (std::uint32_t m =
               block_mask32<Feedback, Store, Stream>(src.a.data(), res, out, i, bound);
           m != 0; m &= m - 1) {
        const std::int64_t j = i + lowest_bit(m);
        const float v = src(j);  // not src.out: a streamed line is not read back
        bad += key_is_nonfinite(magnitude_key(v)) ? 1 : 0;
        keep(j, v, true, base, c);
      }
    }
    if (Stream) store_fence();
    return i;
  }

  /// Host teams: the chunk [begin, end) in blocks of 32, its ends one by one. The one-read
  /// form streams src.out past the cache for large n (from a 16-byte aligned entry on).
  KOKKOS_INLINE_FUNCTION void scan_host(std::int64_t r, std::int64_t begin, std::int64_t end,
                                        std::uint32_t bound) const {
    const std::int64_t base = r * stride;
    std::int64_t c = 0;
    std::uint64_t bad = 0;
    std::int64_t i = begin;
    if (Store && n >= select_stream_min) {
      // Entries up to the first 16-byte aligned one of src.out (floats are 4-byte aligned).
      const std::int64_t lead = static_cast<std::int64_t>(
          ((16u - (reinterpret_cast<std::uintptr_t>(src.out.data() + begin) & 15u)) & 15u) / 4u);
      const std::int64_t a = begin + lead < end ? begin + lead : end;
      scan_entries(begin, a, bound, base, c, bad);
      i = can_stream(src.out.data() + a) ? scan_blocks<true>(a, end, bound, base, c, bad) : a;
    }
    i = scan_blocks<false>(i, end, bound, base, c, bad);
    scan_entries(i, end, bound, base, c, bad);
    counts(2 * r) = static_cast<std::uint32_t>(c);
    counts(2 * r + 1) = static_cast<std::uint32_t>(bad);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::uint32_t bound = state(select_state_bound);
    const std::int64_t r = team.league_rank();
    const std::int64_t begin = r * chunk, base = r * stride;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    if (team.team_size() == 1) {
      scan_host(r, begin, end, bound);
      return;
    }
    // Device backends: a team scan gives each candidate its position (no global atomics).
    // Scan value: low 32 bits candidates, high 32 bits non-finite entries.
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, begin, end),
                          [&](const std::int64_t i, std::uint64_t& upd, const bool final) {
                            const float v = src(i);
                            const std::uint32_t key = magnitude_key(v);
                            const bool cand = key >= bound;
                            const std::uint64_t add =
                                (std::uint64_t(key_is_nonfinite(key)) << 32) | std::uint64_t(cand);
                            if (final) {
                              if (Store) src.out(i) = v;
                              const std::int64_t p = static_cast<std::int64_t>(upd & 0xffffffffu);
                              if (cand && p < stride - 1) {
                                cand_index(base + p) = static_cast<std::uint32_t>(i);
                                cand_value(base + p) = v;
                              }
                              if (i == end - 1) {
                                counts(2 * r) =
                                    static_cast<std::uint32_t>((upd + add) & 0xffffffffu);
                                counts(2 * r + 1) = static_cast<std::uint32_t>((upd + add) >> 32);
                              }
                            }
                            upd += add;
                          });
  }
};

/// The one-read form's last step on the sampled path: residual_out = 0 at the k selected
/// indices (each once: no atomics). Its own parallel kernel, not part of the one-team
/// resolve: the residual was just streamed past the cache, so each zero is a miss, and
/// every thread (on a GPU, the whole device) takes a share; host threads prefetch ahead.
template <class Exec>
struct SelectZeroSelected {
  using Mem = typename Exec::memory_space;
  Kokkos::View<const std::uint32_t*, Mem> index;
  Kokkos::View<float*, Mem> residual;
  std::int64_t k = 0;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    if (i + select_prefetch_ahead < k)
      prefetch_for_write(residual.data() + index(i + select_prefetch_ahead));
    residual(index(i)) = 0.0f;
  }
};

/// The residual pass of the sampled feedback form: residual = acc, or 0 where acc was
/// selected (key > T, or key == T at an index up to the last tie taken). Fully parallel; teams
/// read T, t and that index once, and host teams run a plain loop the compiler vectorizes.
template <class Exec>
struct SelectResidualPass {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::View<const float*, Mem> grad;
  Kokkos::View<float*, Mem> residual;
  Kokkos::View<const std::uint32_t*, Mem> state;
  std::int64_t n = 0, chunk = 0;

  /// r = r + g, or 0 where the sum's key >= thr (restrict and fixed-size blocks: GCC -O2
  /// vectorizes only loops that need no alias check and no epilogue).
  KOKKOS_INLINE_FUNCTION static void zero_from(float* KOKKOS_RESTRICT r,
                                               const float* KOKKOS_RESTRICT g, std::int64_t b,
                                               std::int64_t e, std::uint32_t thr) {
    std::int64_t i = b;
    for (; i + 32 <= e; i += 32) {  // fixed-size blocks: no epilogue, so -O2 vectorizes them
      for (int j = 0; j < 32; ++j) {
        const float v = r[i + j] + g[i + j];
        r[i + j] = magnitude_key(v) >= thr ? 0.0f : v;
      }
    }
    for (; i < e; ++i) {
      const float v = r[i] + g[i];
      r[i] = magnitude_key(v) >= thr ? 0.0f : v;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::uint32_t T = state(0);
    // Ties at indices <= last are taken; none when t == 0.
    const std::int64_t last = state(1) != 0 ? std::int64_t(state(2)) : std::int64_t(-1);
    const std::int64_t begin = team.league_rank() * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    const auto body = [&](const std::int64_t i) {
      const float v = residual(i) + grad(i);
      const std::uint32_t key = magnitude_key(v);
      const bool take = key > T || (key == T && i <= last);
      residual(i) = take ? 0.0f : v;
    };
    if (team.team_size() == 1) {
      // Two plain loops the compiler vectorizes: below `split` ties are taken (key >= T),
      // from it on they are not (key >= T + 1; T is finite, so T + 1 does not wrap).
      const std::int64_t split = last + 1 < begin ? begin : (last + 1 > end ? end : last + 1);
      zero_from(residual.data(), grad.data(), begin, split, T);
      zero_from(residual.data(), grad.data(), split, end, T + 1);
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, begin, end), body);
    }
  }
};

}  // namespace detail
}  // namespace omgs
