// Internal: the device kernels of dense groups (one MPI_Iallreduce of the gradient, no
// top-k): averaging the sum, checking it, and returning a failed group's gradient to the
// residual. Free functions with external linkage, like exchange_kernels.hpp.
#pragma once

#include <cstddef>

#include <omgs/runtime.hpp>

namespace omgs::detail::kernels {

/// v[offset, offset + n) *= scale.
void scale(const ExecSpace& exec, GradientView v, std::size_t offset, std::size_t n, float scale);

/// How many of v[offset, offset + n) are NaN or infinite; counts into a preallocated
/// counter and its host mirror (no allocation).
int count_nonfinite(const ExecSpace& exec, GradientView v, std::size_t offset, std::size_t n,
                    Kokkos::View<int*, DeviceMemory> count,
                    Kokkos::View<int*, DeviceMemory>::HostMirror count_host);

/// dst[offset, offset + n) += src[offset, offset + n).
void add_into(const ExecSpace& exec, GradientView dst, GradientView src, std::size_t offset,
              std::size_t n);

}  // namespace omgs::detail::kernels
