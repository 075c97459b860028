// Internal: the device kernels of clipping and momentum correction with momentum factor
// masking (gradient_prep.cpp, docs/api.md "Accuracy at low density"). Free functions with
// external linkage, like exchange_kernels.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include <omgs/runtime.hpp>

namespace omgs::detail::kernels {

using OffsetView = Kokkos::View<std::size_t*, DeviceMemory>;

/// For each layer l in [first, last) (elements [offset(l), offset(l + 1)) of grad): with
/// clip > 0, g_l *= clip / ||g_l|| where the norm exceeds clip; then, with momentum > 0,
/// g = momentum * u + g (u is not read otherwise). In place: grad then holds what enters the
/// residual this iteration.
void clip_and_accumulate(const ExecSpace& exec, GradientView grad, GradientView velocity,
                         OffsetView offset, std::size_t first, std::size_t last, float clip,
                         float momentum);

/// u[offset, offset + n) = g where g is finite (the new velocity); a non-finite entry keeps
/// its velocity.
void store_velocity(const ExecSpace& exec, GradientView velocity, GradientView grad,
                    std::size_t offset, std::size_t n);

/// Momentum factor masking: u[offset + index[i]] = 0 for i < k, the entries just sent.
void mask_sent(const ExecSpace& exec, GradientView velocity, std::size_t offset,
               Kokkos::View<std::uint32_t*, DeviceMemory> index, std::size_t k);

}  // namespace omgs::detail::kernels
