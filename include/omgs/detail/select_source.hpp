// Internal part of module select: the magnitude key, the digit layout and the value source
// (x, or residual + grad for the feedback form) shared by every select kernel. Not part of
// the public API (namespace omgs::detail); installed because the public, templated
// select.hpp uses it.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

namespace omgs {
namespace detail {

/// Digit layout of the 31-bit magnitude key: 11 + 11 + 9 bits, most significant first.
constexpr int select_shift1 = 20;
constexpr int select_shift2 = 9;
constexpr int select_bins1 = 2048;
constexpr int select_bins2 = 2048;
constexpr int select_bins3 = 512;
/// Inputs below this size are handled by one team (one histogram, no merge).
constexpr std::size_t select_team_chunk_min = 16384;

KOKKOS_FORCEINLINE_FUNCTION std::uint32_t magnitude_key(float v) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && \
    ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && __GNUC__ >= 11))
  // Host code: the builtin keeps the value in a register, so loops that use both v and its
  // key still vectorize (GCC does not vectorize the union below in such loops).
  return __builtin_bit_cast(std::uint32_t, v) & 0x7fffffffu;
#else
  // Type punning through a union is supported by every compiler Kokkos targets (GCC, Clang,
  // nvcc, hipcc, icpx); std::memcpy / bit_cast are not available in device code everywhere.
  union {
    float f;
    std::uint32_t u;
  } pun;
  pun.f = v;
  return pun.u & 0x7fffffffu;
#endif
}

/// +-Inf and NaN have all exponent bits set: key >= 0x7f800000.
KOKKOS_FORCEINLINE_FUNCTION bool key_is_nonfinite(std::uint32_t key) {
  return key >= 0x7f800000u;
}

/// Number of entries of the sorted view v[0, len) that are < value.
template <class View>
KOKKOS_INLINE_FUNCTION std::uint64_t count_less(const View& v, std::uint64_t len,
                                                std::uint32_t value) {
  std::uint64_t lo = 0, hi = len;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (v(mid) < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// The value of entry i: x(i), or residual(i) + grad(i) in the feedback form (a = grad).
/// `out` receives the new residual: the same memory as `residual` in the in-place feedback
/// form, a second buffer in the out-of-place form (then `residual` is never written).
template <class Mem, bool Feedback>
struct SelectSource {
  Kokkos::View<const float*, Mem> a;
  Kokkos::View<const float*, Mem> residual;
  Kokkos::View<float*, Mem> out;
  KOKKOS_FORCEINLINE_FUNCTION float operator()(std::int64_t i) const {
    if (Feedback) return residual(i) + a(i);
    return a(i);
  }
};
}  // namespace detail
}  // namespace omgs
