// Internal part of module select: the threshold of the sampled path's resolve on host
// teams (docs/select.md). Every candidate's key lies in [bound, max]: the radix levels
// split that range into 2048 bins, not the whole key space (the fixed 11 + 11 + 9 bit
// digits put the candidates of a narrow bracket into a handful of top-digit bins: long
// chains of increments to the same counter and two more full passes). Not part of the
// public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include <omgs/detail/select_source.hpp>
#include <omgs/detail/select_team.hpp>

namespace omgs {
namespace detail {

/// Number of significant bits of w (0 for 0).
KOKKOS_INLINE_FUNCTION int bit_length(std::uint32_t w) {
  int b = 0;
  for (; w != 0; w >>= 1) ++b;
  return b;
}

/// The largest key of the list's entries (0 for an empty list).
template <class List>
KOKKOS_INLINE_FUNCTION std::uint32_t list_max_key(const List& list) {
  std::uint32_t mx = 0;
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    for (std::int64_t j = 0; j < len; ++j) {
      const std::uint32_t key = magnitude_key(list.value(b + j));
      mx = key > mx ? key : mx;
    }
  }
  return mx;
}

/// One level over the list entries with key in [lo, hi]: a histogram (in h) of
/// (key - lo) >> shift, in at most select_bins1 bins, then the bin of the need-th largest.
/// Narrows [lo, hi] to that bin and need to the rank within it; returns the bin's size.
template <class List, class H>
KOKKOS_INLINE_FUNCTION std::uint32_t range_level(const List& list, const H& h, std::uint32_t& lo,
                                                 std::uint32_t& hi, std::uint32_t& need) {
  const std::uint32_t width = hi - lo;  // keys < 2^31: no wrap
  const int bits = bit_length(width);
  const int shift = bits > 11 ? bits - 11 : 0;
  const std::uint32_t bins = (width >> shift) + 1;
  std::uint32_t* const hp = h.data();
  for (std::uint32_t c = 0; c < bins; ++c) hp[c] = 0;
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    for (std::int64_t j = 0; j < len; ++j) {
      const std::uint32_t d = magnitude_key(list.value(b + j)) - lo;  // below lo: wraps high
      if (d <= width) ++hp[d >> shift];
    }
  }
  std::uint32_t cum = 0, c = bins - 1;
  for (;; --c) {
    if (cum + hp[c] >= need || c == 0) break;
    cum += hp[c];
  }
  need -= cum;
  lo += c << shift;
  const std::uint32_t top = lo + ((std::uint32_t(1) << shift) - 1);
  hi = top < hi ? top : hi;
  return hp[c];
}

/// Copies the values of the list entries with key in [lo, hi] to gather, in list order.
template <class List, class G>
KOKKOS_INLINE_FUNCTION void range_gather(const List& list, std::uint32_t lo, std::uint32_t hi,
                                         const G& gather) {
  std::int64_t done = 0;
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    for (std::int64_t j = 0; j < len; ++j) {
      const float v = list.value(b + j);
      if (magnitude_key(v) - lo <= hi - lo) gather(done++) = v;
    }
  }
}

/// Host teams: the key T of the need-th largest entry of the list (1 <= need <= its length),
/// every key of which is >= bound, and t, how many entries with key == T are among the need
/// largest. A pass for the largest key, then levels over [bound, largest]; once the bin
/// left fits in gather it is copied there and the remaining levels (or, up to
/// select_direct_bucket entries, the direct ranks) run on it alone.
template <class List, class H, class G>
KOKKOS_INLINE_FUNCTION void host_range_kth_key(const List& list, const H& h, std::uint32_t bound,
                                               std::uint32_t need, const G& gather,
                                               std::uint32_t& T, std::uint32_t& t) {
  using Bucket = ValueList<typename G::memory_space>;
  std::uint32_t lo = bound, hi = list_max_key(list);
  std::uint32_t size = range_level(list, h, lo, hi, need);
  std::uint32_t held = 0;  // entries in gather (those of an earlier, wider bin included)
  bool gathered = false;
  while (lo != hi) {
    if (!gathered && size <= gather.extent(0)) {
      range_gather(list, lo, hi, gather);
      gathered = true;
    } else if (gathered && held != size) {
      range_gather(Bucket{gather, held}, lo, hi, gather);  // in place: writes trail reads
    }
    held = size;
    if (!gathered) {
      size = range_level(list, h, lo, hi, need);
    } else if (size <= select_direct_bucket) {
      bucket_kth_key(gather, size, need, T, t);
      return;
    } else {
      size = range_level(Bucket{gather, held}, h, lo, hi, need);
    }
  }
  T = lo;
  t = need;
}

}  // namespace detail
}  // namespace omgs
