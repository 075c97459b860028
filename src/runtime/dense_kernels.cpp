// The device kernels of dense groups (see dense_kernels.hpp).
#include "runtime/dense_kernels.hpp"

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/pair_format_values.hpp>

namespace omgs::detail::kernels {

void scale(const ExecSpace& exec, GradientView v, std::size_t offset, std::size_t n, float scale) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_scale"), range_policy(exec, 0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::size_t i) { v(offset + i) *= scale; });
}

// Atomics into a preallocated counter, as count_failed_blocks (no parallel_reduce label).
int count_nonfinite(const ExecSpace& exec, GradientView v, std::size_t offset, std::size_t n,
                    Kokkos::View<int*, DeviceMemory> count,
                    Kokkos::View<int*, DeviceMemory>::HostMirror count_host) {
  if (n == 0) return 0;
  fill_zero(exec, count);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_check"), range_policy(exec, 0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::size_t i) {
        const float x = v(offset + i);
        if (!(x - x == 0.0f)) Kokkos::atomic_add(&count(0), 1);  // NaN or +-Inf
      });
  Kokkos::deep_copy(exec, count_host, count);
  detail::fence(exec);
  return count_host(0);
}

void add_into(const ExecSpace& exec, GradientView dst, GradientView src, std::size_t offset,
              std::size_t n) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_restore"),
      range_policy(exec, 0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::size_t i) { dst(offset + i) += src(offset + i); });
}

namespace {
KOKKOS_INLINE_FUNCTION std::uint16_t narrow16(float v, bool brain) {
  return brain ? pairs::to_bf16(v) : pairs::to_fp16(v);
}
KOKKOS_INLINE_FUNCTION float widen16(std::uint16_t h, bool brain) {
  return brain ? pairs::from_bf16(h) : pairs::from_fp16(h);
}
}  // namespace

void narrow_with_residual(const ExecSpace& exec, Bits16View bits, GradientView grad,
                          GradientView resid, std::size_t offset, std::size_t n, bool brain) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_narrow"),
      range_policy(exec, 0, static_cast<std::int64_t>(n)), KOKKOS_LAMBDA(const std::size_t i) {
        bits(i) = narrow16(grad(offset + i) + resid(offset + i), brain);
      });
}

void keep_rounding_error(const ExecSpace& exec, Bits16View sent, GradientView error,
                         GradientView grad, GradientView resid, std::size_t offset, std::size_t n,
                         bool brain) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_feedback"),
      range_policy(exec, 0, static_cast<std::int64_t>(n)), KOKKOS_LAMBDA(const std::size_t i) {
        const std::size_t j = offset + i;
        const float v = grad(j) + resid(j);  // what narrow_with_residual rounded
        resid(j) = (v - widen16(sent(i), brain)) + error(i);
      });
}

void widen_into(const ExecSpace& exec, Bits16View means, GradientView agg, std::size_t offset,
                std::size_t n, bool brain) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::dense_widen"), range_policy(exec, 0, static_cast<std::int64_t>(n)),
      KOKKOS_LAMBDA(const std::size_t i) { agg(offset + i) = widen16(means(i), brain); });
}

}  // namespace omgs::detail::kernels
