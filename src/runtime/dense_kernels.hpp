// Internal: the device kernels of dense groups (one MPI_Iallreduce of the gradient, no
// top-k): averaging the sum, checking it, and returning a failed group's gradient to the
// residual; in the 16-bit form (RuntimeOptions::dense_wire), rounding with error feedback. Free
// functions with external linkage, like exchange_kernels.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

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

/// The 16-bit dense form's values (their bits; RuntimeOptions::dense_wire bf16 / fp16).
using Bits16View = Kokkos::View<std::uint16_t*, DeviceMemory>;

/// The 16-bit dense form's send side: bits(i) = round16(grad(offset + i) + resid(offset + i))
/// (bf16 when brain, else fp16); the residual is not written (narrow_feedback does, once
/// the exchange applied).
void narrow_with_residual(const ExecSpace& exec, Bits16View bits, GradientView grad,
                          GradientView resid, std::size_t offset, std::size_t n, bool brain);

/// Once the 16-bit exchange is applied: resid(offset + i) = grad + resid - widen(sent(i)) +
/// error(i): the rounding error of what this rank sent (with the same fp32 sum as
/// narrow_with_residual) and of the means it computed (error: P x their rounding error on
/// this rank's shard, 0 elsewhere), kept for the next iteration (error feedback).
void keep_rounding_error(const ExecSpace& exec, Bits16View sent, GradientView error,
                         GradientView grad, GradientView resid, std::size_t offset, std::size_t n,
                         bool brain);

/// agg(offset + i) = widen(means(i)), to check the means before applying them.
void widen_into(const ExecSpace& exec, Bits16View means, GradientView agg, std::size_t offset,
                std::size_t n, bool brain);

}  // namespace omgs::detail::kernels
