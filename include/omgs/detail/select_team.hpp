// Internal part of module select: one-team radix select over a list of entries (the pick
// that writes the output is in select_pick.hpp). Used by the small-n path (the list is the
// whole input, or an AccList in the one-read feedback form), by the threshold sample and by
// the candidate resolve of the sampled path (docs/select.md). Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include <omgs/detail/select_source.hpp>

namespace omgs {
namespace detail {

/// The whole input as one segment: entry p is src(p), its index p.
template <class Mem, bool Feedback>
struct DirectList {
  SelectSource<Mem, Feedback> src;
  std::int64_t n = 0;
  KOKKOS_INLINE_FUNCTION int segments() const { return 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_begin(int) const { return 0; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_len(int) const { return n; }
  KOKKOS_FORCEINLINE_FUNCTION float value(std::int64_t p) const { return src(p); }
  KOKKOS_FORCEINLINE_FUNCTION std::uint32_t index(std::int64_t p) const {
    return static_cast<std::uint32_t>(p);
  }
};

/// The out-of-place feedback form's whole input: the first pass (level 0) computes entry p,
/// acc = residual_in(p) + grad(p), and stores it in residual_out; every later pass reads it
/// back from there (one read instead of two, and no add).
template <class Mem>
struct AccList {
  SelectSource<Mem, true> src;
  std::int64_t n = 0;
  KOKKOS_INLINE_FUNCTION int segments() const { return 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_begin(int) const { return 0; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_len(int) const { return n; }
  KOKKOS_FORCEINLINE_FUNCTION float store(std::int64_t p) const {
    const float v = src(p);
    src.out(p) = v;
    return v;
  }
  KOKKOS_FORCEINLINE_FUNCTION float value(std::int64_t p) const { return src.out(p); }
  KOKKOS_FORCEINLINE_FUNCTION std::uint32_t index(std::int64_t p) const {
    return static_cast<std::uint32_t>(p);
  }
};

/// Entry p in the first pass over a list: its value (AccList: computed and stored).
template <class List>
KOKKOS_FORCEINLINE_FUNCTION float first_value(const List& list, std::int64_t p) {
  return list.value(p);
}
template <class Mem>
KOKKOS_FORCEINLINE_FUNCTION float first_value(const AccList<Mem>& list, std::int64_t p) {
  return list.store(p);
}

/// Entries per block of the sample: 16 floats, one 64-byte cache line (two where a group's
/// view starts inside a line).
constexpr std::int64_t select_sample_block = 16;

/// A jittered strided sample of the input, taken in blocks of select_sample_block
/// consecutive entries: sample entry p = 16 b + o is src(16 b stride + 16 j(b) + o), j(b) in
/// [0, stride) from a multiplicative hash of the block b. A plain stride aliases with
/// periodic data (a period dividing the stride: the sample sees one phase only, e.g. every
/// 5th entry 0 and a stride of 195) and the bracket misses; the jitter keeps the positions
/// deterministic (the same on every backend and rank) without a period. The blocks make a
/// sample of s entries touch s / 16 cache lines per stream instead of s: each line is a
/// miss at a position the prefetchers cannot guess, and s misses had made the sample cost
/// mid-size groups a sixth of their call (omgs-bench-topk-layers, docs/select.md).
template <class Mem, bool Feedback>
struct SampleList {
  SelectSource<Mem, Feedback> src;
  std::int64_t count = 0, stride = 1;
  KOKKOS_INLINE_FUNCTION int segments() const { return 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_begin(int) const { return 0; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_len(int) const { return count; }
  KOKKOS_FORCEINLINE_FUNCTION std::int64_t position(std::int64_t p) const {
    const std::int64_t b = p / select_sample_block, o = p % select_sample_block;
    // Knuth's multiplicative hash, scaled to [0, stride) by a multiply-high (no division).
    const std::uint32_t h = static_cast<std::uint32_t>(b) * 2654435761u;
    const std::int64_t j =
        static_cast<std::int64_t>((std::uint64_t(h) * std::uint64_t(stride)) >> 32);
    return (b * stride + j) * select_sample_block + o;
  }
  KOKKOS_FORCEINLINE_FUNCTION float value(std::int64_t p) const { return src(position(p)); }
  KOKKOS_FORCEINLINE_FUNCTION std::uint32_t index(std::int64_t p) const {
    return static_cast<std::uint32_t>(position(p));
  }
};

/// Host code: asks the cache for sample entry p ahead of its use (a no-op in device code and
/// past the sample's end). Each block of the sample misses, at positions the hardware
/// prefetchers do not follow (the jitter); the gather asks once per block.
template <class Mem, bool Feedback>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_entry(const SampleList<Mem, Feedback>& list,
                                                std::int64_t p) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  if (p >= list.count) return;
  const std::int64_t i = list.position(p);
  __builtin_prefetch(list.src.a.data() + i);
  if (Feedback) __builtin_prefetch(list.src.residual.data() + i);
#else
  (void)list;
  (void)p;
#endif
}
/// Host code: asks the cache for the line of p, to be written (a no-op in device code).
KOKKOS_FORCEINLINE_FUNCTION void prefetch_for_write(const float* p) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  __builtin_prefetch(p, 1);
#else
  (void)p;
#endif
}
/// How many indices ahead the zeroing kernel prefetches its scattered writes on host teams.
constexpr std::int64_t select_prefetch_ahead = 16;
/// Sample entries the gather prefetches ahead: four blocks.
constexpr std::int64_t select_sample_prefetch_ahead = 4 * select_sample_block;

/// The candidate buffer of the sampled path: segment s (one per team of the bracket pass)
/// starts at s * stride and holds min(counts(2 s), stride - 1) entries, in index order.
template <class Mem>
struct CandidateList {
  Kokkos::View<const std::uint32_t*, Mem> counts;
  Kokkos::View<const std::uint32_t*, Mem> cand_index;
  Kokkos::View<const float*, Mem> cand_value;
  int nseg = 0;
  std::int64_t stride = 0;
  KOKKOS_INLINE_FUNCTION int segments() const { return nseg; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_begin(int s) const { return s * stride; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_len(int s) const {
    const std::int64_t c = counts(2 * s);
    return c < stride - 1 ? c : stride - 1;
  }
  KOKKOS_FORCEINLINE_FUNCTION float value(std::int64_t p) const { return cand_value(p); }
  KOKKOS_FORCEINLINE_FUNCTION std::uint32_t index(std::int64_t p) const { return cand_index(p); }
};

template <class Exec>
using SelectScratchU32 =
    Kokkos::View<std::uint32_t*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;

/// Scratch of the one-team kernels: one 2048-bin histogram and 4 shared words.
template <class Exec>
std::size_t select_team_scratch_bytes() {
  return SelectScratchU32<Exec>::shmem_size(2048) + SelectScratchU32<Exec>::shmem_size(4);
}

/// Histogram (in h, zeroed here) of digit (key >> shift) & mask over the list entries whose
/// key >> (shift + width) equals prefix (level 0: every entry). Returns the number of
/// non-finite entries seen (level 0 only; team-wide on every thread). `top`: no bin above it
/// is occupied (host level 0: the largest key's bin, so the caller's scan starts there).
template <class Member, class List, class H>
KOKKOS_INLINE_FUNCTION std::uint64_t team_histogram(const Member& team, const List& list,
                                                    const H& h, int bins, int shift, int width,
                                                    std::uint32_t prefix, bool level0, int& top) {
  top = bins - 1;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins), [&](const int b) { h(b) = 0; });
  team.team_barrier();
  const std::uint32_t mask = static_cast<std::uint32_t>(bins - 1);
  const int fshift = shift + width;
  std::uint64_t bad = 0;
  std::uint32_t mx = 0;  // host level 0: the largest key
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    if (team.team_size() == 1 && level0) {
      std::uint32_t* const hp = h.data();
      for (std::int64_t j = 0; j < len; ++j) {
        const std::uint32_t key = magnitude_key(first_value(list, b + j));
        bad += key_is_nonfinite(key) ? 1 : 0;
        mx = key > mx ? key : mx;
        ++hp[key >> select_shift1];
      }
    } else if (team.team_size() == 1) {
      for (std::int64_t j = 0; j < len; ++j) {
        const std::uint32_t key = magnitude_key(list.value(b + j));
        if ((key >> fshift) == prefix) ++h((key >> shift) & mask);
      }
    } else {
      std::uint64_t seg_bad = 0;
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, len),
          [&](const std::int64_t j, std::uint64_t& nb) {
            const float v = level0 ? first_value(list, b + j) : list.value(b + j);
            const std::uint32_t key = magnitude_key(v);
            nb += key_is_nonfinite(key) ? 1 : 0;
            if (level0 || (key >> fshift) == prefix)
              Kokkos::atomic_add(&h((key >> shift) & mask), std::uint32_t(1));
          },
          seg_bad);
      bad += seg_bad;
    }
  }
  if (team.team_size() == 1 && level0) top = static_cast<int>(mx >> select_shift1);
  team.team_barrier();
  return bad;
}

/// Host teams scan their list in blocks of this many entries: a block whose largest key is
/// below what the scan looks for is dealt with by a loop the compiler vectorizes.
constexpr std::int64_t select_host_block = 8;

/// The largest key of list entries [p, p + select_host_block).
template <class List>
KOKKOS_FORCEINLINE_FUNCTION std::uint32_t block_max_key(const List& list, std::int64_t p) {
  std::uint32_t mx = 0;
  for (std::int64_t u = 0; u < select_host_block; ++u) {
    const std::uint32_t key = magnitude_key(list.value(p + u));
    mx = key > mx ? key : mx;
  }
  return mx;
}

/// Whether host teams gather a list's threshold bucket in blocks (skipping blocks below it).
template <class List>
struct skips_blocks : std::false_type {};
template <class Mem>
struct skips_blocks<AccList<Mem>> : std::true_type {};

/// A list of values in a view (a gathered threshold bucket, the gathered sample); indices are
/// not needed.
template <class Mem>
struct ValueList {
  Kokkos::View<const float*, Mem> v;
  std::int64_t n = 0;
  KOKKOS_INLINE_FUNCTION int segments() const { return 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_begin(int) const { return 0; }
  KOKKOS_INLINE_FUNCTION std::int64_t seg_len(int) const { return n; }
  KOKKOS_FORCEINLINE_FUNCTION float value(std::int64_t p) const { return v(p); }
};

/// One digit level: histogram, then the bucket of the need-th largest entry. Updates
/// prefix (the key bits fixed so far) and need (the rank within the bucket); returns the
/// bucket's size. Level 0 also returns the non-finite count in bad.
template <class Member, class List, class H>
KOKKOS_INLINE_FUNCTION std::uint32_t team_level(const Member& team, const List& list, const H& h,
                                                const H& shared, int level, std::uint32_t& prefix,
                                                std::uint32_t& need, std::uint64_t& bad) {
  const int shifts[3] = {select_shift1, select_shift2, 0};
  const int bins[3] = {select_bins1, select_bins2, select_bins3};
  const int widths[3] = {0, 11, 9};  // width of each digit below the top one
  int top = 0;
  const std::uint64_t nb = team_histogram(team, list, h, bins[level], shifts[level], widths[level],
                                          prefix, level == 0, top);
  if (level == 0) bad = nb;
  Kokkos::single(Kokkos::PerTeam(team), [&]() {
    std::uint32_t cum = 0, b = 0;
    for (int c = top; c >= 0; --c) {
      b = static_cast<std::uint32_t>(c);
      if (cum + h(c) >= need) break;
      cum += h(c);
    }
    shared(0) = b;
    shared(1) = need - cum;
    shared(2) = h(b);
  });
  team.team_barrier();
  prefix = (level == 0 ? 0u : prefix << (level == 1 ? 11 : 9)) | shared(0);
  need = shared(1);
  const std::uint32_t size = shared(2);
  team.team_barrier();
  return size;
}

/// Copies the values of the list whose top digit is b1 to gather[0, size), in list order.
template <class Member, class List, class G>
KOKKOS_INLINE_FUNCTION void team_gather(const Member& team, const List& list, std::uint32_t b1,
                                        const G& gather) {
  std::int64_t done = 0;
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    if (team.team_size() == 1) {
      const auto take = [&](const std::int64_t p) {
        const float v = list.value(p);
        if ((magnitude_key(v) >> select_shift1) == b1) gather(done++) = v;
      };
      std::int64_t j = 0;
      // An AccList is one stream without an add: blocks below the bucket are skipped.
      if (skips_blocks<List>::value)
        for (; j + select_host_block <= len; j += select_host_block)
          if ((block_max_key(list, b + j) >> select_shift1) >= b1)
            for (std::int64_t u = 0; u < select_host_block; ++u) take(b + j + u);
      for (; j < len; ++j) take(b + j);
      continue;
    }
    std::int64_t seg_total = 0;
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, len),
                          [&](const std::int64_t j, std::int64_t& upd, const bool final) {
                            const float v = list.value(b + j);
                            const bool in = (magnitude_key(v) >> select_shift1) == b1;
                            if (final && in) gather(done + upd) = v;
                            upd += in ? 1 : 0;
                          });
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, len),
        [&](const std::int64_t j, std::int64_t& c) {
          c += (magnitude_key(list.value(b + j)) >> select_shift1) == b1 ? 1 : 0;
        },
        seg_total);
    done += seg_total;
  }
  team.team_barrier();
}

/// Host teams resolve a threshold bucket of at most this many entries directly.
constexpr std::uint32_t select_direct_bucket = 64;

/// The key T of the need-th largest of the values v[0, size) (1 <= need <= size) and t, how
/// many entries with key == T are among the need largest: T is the key with fewer than need
/// keys above it and at least need at or above it.
template <class G>
KOKKOS_INLINE_FUNCTION void bucket_kth_key(const G& v, std::uint32_t size, std::uint32_t need,
                                           std::uint32_t& T, std::uint32_t& t) {
  for (std::uint32_t i = 0; i < size; ++i) {
    const std::uint32_t key = magnitude_key(v(i));
    std::uint32_t above = 0, equal = 0;
    for (std::uint32_t j = 0; j < size; ++j) {
      const std::uint32_t other = magnitude_key(v(j));
      above += other > key ? 1 : 0;
      equal += other == key ? 1 : 0;
    }
    if (above < need && above + equal >= need) {
      T = key;
      t = need - above;
      return;
    }
  }
}

/// The key T of the need-th largest entry of the list (1 <= need <= its length) and t, how
/// many entries with key == T are among the need largest (lowest indices first). Three digit
/// levels (11 + 11 + 9 bits); when the threshold bucket of the top digit fits in gather, it
/// is gathered there and the last two levels run on it only. `bad`: non-finite count.
template <class Member, class List, class H, class G>
KOKKOS_INLINE_FUNCTION void team_kth_key(const Member& team, const List& list, const H& h,
                                         const H& shared, std::uint32_t need, const G& gather,
                                         std::uint32_t& T, std::uint32_t& t, std::uint64_t& bad) {
  std::uint32_t prefix = 0;
  std::uint64_t unused = 0;
  const std::uint32_t size = team_level(team, list, h, shared, 0, prefix, need, bad);
  if (team.team_size() == 1 && size <= select_direct_bucket && size <= gather.extent(0)) {
    // Host teams, a small threshold bucket: its exact ranks directly (size^2 compares)
    // instead of two more histograms of 2048 and 512 bins.
    team_gather(team, list, prefix, gather);
    bucket_kth_key(gather, size, need, T, t);
    return;
  }
  if (size <= gather.extent(0)) {
    team_gather(team, list, prefix, gather);
    const ValueList<typename G::memory_space> bucket{gather, size};
    team_level(team, bucket, h, shared, 1, prefix, need, unused);
    team_level(team, bucket, h, shared, 2, prefix, need, unused);
  } else {
    team_level(team, list, h, shared, 1, prefix, need, unused);
    team_level(team, list, h, shared, 2, prefix, need, unused);
  }
  T = prefix;
  t = need;
}

}  // namespace detail
}  // namespace omgs
