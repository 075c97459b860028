// Internal: the 16-bit value codes of the compact pair format (pair_format.hpp), written by
// hand on the float bits so that they work on host and device with Kokkos 3.4 (which has no
// bhalf_t) and 4.x alike. Rounding is to nearest, ties to even. Finite values never become
// infinite: a value beyond the type's largest finite value is sent as that value (saturates),
// and the difference stays in the sender's residual like every other rounding error. NaN
// stays NaN and +-Inf stays +-Inf (the runtime never sends either: a non-finite group fails).
// fp16 keeps subnormals (|v| down to 2^-24); smaller magnitudes round to a signed zero.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace omgs::detail::pairs {

KOKKOS_FORCEINLINE_FUNCTION std::uint32_t float_bits(float v) {
  // Type punning through a union (see magnitude_key in select_source.hpp for why).
  union {
    float f;
    std::uint32_t u;
  } pun;
  pun.f = v;
  return pun.u;
}

KOKKOS_FORCEINLINE_FUNCTION float bits_float(std::uint32_t u) {
  union {
    std::uint32_t u;
    float f;
  } pun;
  pun.u = u;
  return pun.f;
}

/// float -> bfloat16 bits: the upper half of the float, rounded to nearest even.
KOKKOS_INLINE_FUNCTION std::uint16_t to_bf16(float v) {
  const std::uint32_t x = float_bits(v), a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(x >> 16);           // +-Inf
  const std::uint32_t r = x + 0x7fffu + ((x >> 16) & 1u);
  if ((r & 0x7fffffffu) >= 0x7f800000u)  // rounded past the largest finite: saturate
    return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7f7fu);
  return static_cast<std::uint16_t>(r >> 16);
}

KOKKOS_FORCEINLINE_FUNCTION float from_bf16(std::uint32_t h) {
  return bits_float(h << 16);
}

/// float -> IEEE binary16 bits, rounded to nearest even, subnormals kept, saturating.
KOKKOS_INLINE_FUNCTION std::uint16_t to_fp16(float v) {
  const std::uint32_t x = float_bits(v), a = x & 0x7fffffffu;
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // quiet NaN
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // +-Inf
  // 65520 is the midpoint between 65504 (largest finite) and 2^16: it and above round to Inf.
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7bffu);
  if (a >= 0x38800000u) {  // normal in binary16 (>= 2^-14): rebias the exponent by 127 - 15
    const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - (112u << 23)) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: rounds to zero
  // Subnormal: units of 2^-24; the float's significand (with its hidden bit) shifted down.
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - (a >> 23);  // 14 .. 24
  std::uint32_t h = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

KOKKOS_INLINE_FUNCTION float from_fp16(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float mag = static_cast<float>(m) * 5.9604644775390625e-8f;
    return bits_float(float_bits(mag) | sign);
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace omgs::detail::pairs
