// Internal part of module select: the index-ordered pick of the one-team kernels, which
// writes the output (and, in the feedback forms, the residual) once the threshold key T and
// the tie count t are known (docs/select.md). Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include <omgs/detail/select_source.hpp>
#include <omgs/detail/select_team.hpp>

namespace omgs {
namespace detail {

/// What a pick writes to the residual: nothing; every entry (residual = taken ? 0 : value;
/// the in-place feedback form's small path); or 0 at the taken entries only (the
/// out-of-place form, whose residual_out already holds the values).
enum class PickResidual { none, all, selected };

/// team_pick on a host team (one thread, plain counters). Unless every residual entry is
/// written, a block of select_host_block entries whose keys all lie below T is skipped after
/// a max of its keys (with the residual to write, the plain loop measured fewer instructions).
template <PickResidual W, class List, class Out>
KOKKOS_INLINE_FUNCTION void host_pick(const List& list, std::uint32_t T, std::uint32_t t,
                                      const Out& out) {
  std::uint64_t pos = 0, seen = 0;
  const auto pick = [&](const std::int64_t p) {
    const float v = list.value(p);
    const std::uint32_t key = magnitude_key(v);
    bool take = false;
    if (key >= T) {
      const std::uint32_t idx = list.index(p);
      const bool tie = key == T;
      take = !tie || seen < t;
      if (tie) {
        if (take && seen + 1 == t) out.state(2) = idx;
        ++seen;
      }
      if (take) {
        out.index(pos) = idx;
        out.value(pos) = v;
        ++pos;
        if (W == PickResidual::selected) out.residual(idx) = 0.0f;
      }
    }
    if (W == PickResidual::all) out.residual(list.index(p)) = take ? 0.0f : v;
  };
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    std::int64_t j = 0;
    if (W != PickResidual::all)
      for (; j + select_host_block <= len; j += select_host_block)
        if (block_max_key(list, b + j) >= T)
          for (std::int64_t u = 0; u < select_host_block; ++u) pick(b + j + u);
    for (; j < len; ++j) pick(b + j);
  }
}

/// Writes the selected entries of the list (key > T, or key == T among the first t such
/// entries in list order) to the outputs in list (= index) order. state(2) receives the
/// index of the last tie taken (when t > 0). W: what is written to out.residual (PickResidual).
template <PickResidual W, class Member, class List, class H, class Out>
KOKKOS_INLINE_FUNCTION void team_pick(const Member& team, const List& list, const H& shared,
                                      std::uint32_t T, std::uint32_t t, const Out& out) {
  if (team.team_size() == 1) return host_pick<W>(list, T, t, out);
  std::uint64_t carry = 0;  // low 32 bits: entries above T so far, high 32 bits: ties
  for (int s = 0; s < list.segments(); ++s) {
    const std::int64_t b = list.seg_begin(s), len = list.seg_len(s);
    if (len == 0) continue;
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, len),
                          [&](const std::int64_t j, std::uint64_t& upd, const bool final) {
                            const float v = list.value(b + j);
                            const std::uint32_t key = magnitude_key(v);
                            const bool above = key > T, tie = key == T;
                            const std::uint64_t add =
                                (static_cast<std::uint64_t>(tie) << 32) | std::uint64_t(above);
                            if (final) {
                              const std::uint64_t cur = carry + upd;
                              const std::uint64_t a = cur & 0xffffffffu, seen = cur >> 32;
                              const bool take = above || (tie && seen < t);
                              const std::uint32_t idx = list.index(b + j);
                              if (take) {
                                const std::uint64_t p = a + (seen < t ? seen : t);
                                out.index(p) = idx;
                                out.value(p) = v;
                                if (tie && seen + 1 == t) out.state(2) = idx;
                                if (W == PickResidual::selected) out.residual(idx) = 0.0f;
                              }
                              if (W == PickResidual::all) out.residual(idx) = take ? 0.0f : v;
                              if (j == len - 1) {
                                shared(2) = static_cast<std::uint32_t>((cur + add) & 0xffffffffu);
                                shared(3) = static_cast<std::uint32_t>((cur + add) >> 32);
                              }
                            }
                            upd += add;
                          });
    team.team_barrier();
    carry = (static_cast<std::uint64_t>(shared(3)) << 32) | shared(2);
    team.team_barrier();
  }
}

/// Output views of a pick.
template <class Mem>
struct PickOutput {
  Kokkos::View<std::uint32_t*, Mem> index;
  Kokkos::View<float*, Mem> value;
  Kokkos::View<std::uint32_t*, Mem> state;
  Kokkos::View<float*, Mem> residual;
};

}  // namespace detail
}  // namespace omgs
