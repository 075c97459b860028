// Internal part of module select: the candidate mask of a block of 32 entries, used by the
// bracket pass of the sampled path on host teams (docs/select.md). Bit j of the mask says
// that entry i + j has key >= bound; the pass skips a block whose mask is 0 and visits only
// the set bits of the others, so compacting costs per candidate, not per entry of a block
// that holds one. Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include <omgs/detail/select_source.hpp>

#if defined(__SSE2__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <emmintrin.h>
#define OMGS_SELECT_MASK_SSE2 1
#endif

namespace omgs {
namespace detail {

/// Index of the lowest set bit of m (m != 0).
KOKKOS_FORCEINLINE_FUNCTION int lowest_bit(std::uint32_t m) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __ffs(static_cast<int>(m)) - 1;
#elif defined(__GNUC__)
  return __builtin_ctz(m);
#else
  int j = 0;
  while ((m & 1u) == 0) m >>= 1, ++j;
  return j;
#endif
}

/// The candidate mask of the block [i, i + 32): bit j set when the key of v(i + j) is at
/// least bound (bound <= 0x7f800000, so every non-finite entry is a candidate). v is a[i + j]
/// (Sum false) or r[i + j] + a[i + j] (Sum true: the feedback forms' acc, the same float add
/// as SelectSource); Store writes v to o[i + j] as well (the one-read feedback form), with
/// non-temporal stores when Stream is set (o + i must then be 16-byte aligned; the caller
/// issues store_fence() after its last block).
template <bool Sum, bool Store, bool Stream = false>
KOKKOS_FORCEINLINE_FUNCTION std::uint32_t block_mask32(const float* KOKKOS_RESTRICT a,
                                                       const float* KOKKOS_RESTRICT r,
                                                       float* KOKKOS_RESTRICT o, std::int64_t i,
                                                       std::uint32_t bound) {
  std::uint32_t m = 0;
#if defined(OMGS_SELECT_MASK_SSE2)
  // Keys are below 2^31, so the signed compare key > bound - 1 is key >= bound (bound 0:
  // bound - 1 = -1, every key). Four entries per compare, one movemask per four bits.
  const __m128i lim = _mm_set1_epi32(static_cast<int>(bound) - 1);
  const __m128i abs = _mm_set1_epi32(0x7fffffff);
  for (int j = 0; j < 32; j += 4) {
    __m128 v = _mm_loadu_ps(a + i + j);
    if (Sum) v = _mm_add_ps(_mm_loadu_ps(r + i + j), v);
    if (Store && Stream) _mm_stream_ps(o + i + j, v);
    if (Store && !Stream) _mm_storeu_ps(o + i + j, v);
    const __m128i key = _mm_and_si128(_mm_castps_si128(v), abs);
    const int bits = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, lim)));
    m |= static_cast<std::uint32_t>(bits) << j;
  }
#else
  for (int j = 0; j < 32; ++j) {
    const float v = Sum ? r[i + j] + a[i + j] : a[i + j];
    if (Store) o[i + j] = v;
    m |= static_cast<std::uint32_t>(magnitude_key(v) >= bound) << j;
  }
#endif
  return m;
}

/// Whether block_mask32 can stream to o + i (SSE2 host code and a 16-byte aligned address).
KOKKOS_FORCEINLINE_FUNCTION bool can_stream(const float* o) {
#if defined(OMGS_SELECT_MASK_SSE2)
  return (reinterpret_cast<std::uintptr_t>(o) & 15u) == 0;
#else
  (void)o;
  return false;
#endif
}

/// Orders the non-temporal stores of block_mask32 before what follows (a no-op without SSE2).
KOKKOS_FORCEINLINE_FUNCTION void store_fence() {
#if defined(OMGS_SELECT_MASK_SSE2)
  _mm_sfence();
#endif
}

}  // namespace detail
}  // namespace omgs
