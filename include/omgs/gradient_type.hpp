// The gradients' element type (RuntimeOptions::gradient_type; docs/api.md, "16-bit
// gradients"): fp32, or bf16 / fp16 views that the runtime widens to its fp32 residual and
// accumulation and into which it writes the aggregated gradient back.
//
// omgs::bf16_t and omgs::fp16_t are 2-byte IEEE bfloat16 / binary16 storage types:
// Kokkos::Experimental::bhalf_t / half_t where Kokkos makes them real 16-bit types (Kokkos 4
// with CUDA or SYCL; half_t also in Kokkos 4 with HIP and in Kokkos 3.4 with CUDA), otherwise
// omgs's own 16-bit type with the same bits (Kokkos 3.4 has no bhalf_t, Kokkos 4.6 with HIP
// makes bhalf_t float, and both Kokkos 3.4 and 4.x make half_t / bhalf_t plain float on
// host-only back-ends: Serial, OpenMP, Threads). Either way
// a view of them holds 2 bytes per element, so another framework's bf16 / fp16 memory
// (e.g. a torch tensor's) can be wrapped in an unmanaged view.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Half.hpp>

#include <cstdint>
#include <string_view>

#include <omgs/detail/pair_format_values.hpp>
#include <omgs/export.hpp>

namespace omgs {

/// The element type of the gradient views the runtime takes (RuntimeOptions::gradient_type).
enum class GradientType : std::uint8_t { fp32, bf16, fp16 };
OMGS_EXPORT std::string_view to_string(GradientType type);
/// "fp32" | "bf16" | "fp16"; throws omgs::Error naming the value otherwise.
OMGS_EXPORT GradientType parse_gradient_type(std::string_view name);

namespace detail {

/// omgs's own 16-bit storage where Kokkos has no real 16-bit type: the bits, converted to
/// and from float by the pair format's codes (round to nearest even; a finite value beyond
/// the largest finite one saturates to it; NaN and +-Inf stay).
template <bool Brain>
struct Float16Bits {
  std::uint16_t bits;
  Float16Bits() = default;
  KOKKOS_INLINE_FUNCTION explicit Float16Bits(float v)
      : bits(Brain ? pairs::to_bf16(v) : pairs::to_fp16(v)) {}
  KOKKOS_INLINE_FUNCTION explicit operator float() const {
    return Brain ? pairs::from_bf16(bits) : pairs::from_fp16(bits);
  }
};

}  // namespace detail

#if defined(KOKKOS_BHALF_T_IS_FLOAT) && !KOKKOS_BHALF_T_IS_FLOAT
using bf16_t = Kokkos::Experimental::bhalf_t;
#else
using bf16_t = detail::Float16Bits<true>;
#endif
#if defined(KOKKOS_HALF_T_IS_FLOAT) && !KOKKOS_HALF_T_IS_FLOAT
using fp16_t = Kokkos::Experimental::half_t;
#else
using fp16_t = detail::Float16Bits<false>;
#endif
static_assert(sizeof(bf16_t) == 2 && sizeof(fp16_t) == 2, "16-bit gradient types of 2 bytes");

}  // namespace omgs
