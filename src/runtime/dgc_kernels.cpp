// The device kernels of clipping and momentum correction (see dgc_kernels.hpp).
#include "runtime/dgc_kernels.hpp"

#include <omgs/detail/kokkos_helpers.hpp>

namespace omgs::detail::kernels {

namespace {
// Kokkos' math functions moved from Kokkos::Experimental to Kokkos in 3.7 (the old names
// are deprecated in 4).
KOKKOS_INLINE_FUNCTION double device_sqrt(double x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}
}  // namespace

void clip_and_accumulate(const ExecSpace& exec, GradientView grad, GradientView velocity,
                         OffsetView offset, std::size_t first, std::size_t last, float clip,
                         float momentum) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  // One team per layer: its norm, then its update.
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::clip_and_accumulate"),
      Policy(exec, static_cast<int>(last - first), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const std::size_t l = first + static_cast<std::size_t>(team.league_rank());
        const std::size_t b = offset(l), e = offset(l + 1);
        float scale = 1.0f;
        if (clip > 0.0f) {
          double squares = 0.0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, b, e),
              [&](const std::size_t i, double& s) {
                const double x = static_cast<double>(grad(i));
                s += x * x;
              },
              squares);
          const double norm = device_sqrt(squares);
          // A non-finite norm fails the comparison: the values stay, and the selection
          // reports them.
          if (norm > static_cast<double>(clip)) scale = static_cast<float>(clip / norm);
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, b, e), [&](const std::size_t i) {
          const float g = scale * grad(i);
          grad(i) = momentum > 0.0f ? momentum * velocity(i) + g : g;
        });
      });
}

void store_velocity(const ExecSpace& exec, GradientView velocity, GradientView grad,
                    std::size_t offset, std::size_t n) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::store_velocity"),
      range_policy(exec, static_cast<std::int64_t>(offset), static_cast<std::int64_t>(offset + n)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const float g = grad(i);
        if (g - g == 0.0f) velocity(i) = g;  // finite: NaN and infinities give NaN
      });
}

void mask_sent(const ExecSpace& exec, GradientView velocity, std::size_t offset,
               Kokkos::View<std::uint32_t*, DeviceMemory> index, std::size_t k) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::mask_sent"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::int64_t i) { velocity(offset + index(i)) = 0.0f; });
}

}  // namespace omgs::detail::kernels
