// The device kernels of dense groups (see dense_kernels.hpp).
#include "runtime/dense_kernels.hpp"

#include <omgs/detail/kokkos_helpers.hpp>

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

}  // namespace omgs::detail::kernels
