// Internal Kokkos helpers shared by the select module and the runtime: kernel labels built
// once, range policies and fences that do not allocate, a zero fill without deep_copy's
// per-call label. Not part of the public API (namespace omgs::detail); installed because the
// public, templated select.hpp uses it.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace omgs {

/// A kernel or region label built once. Kokkos takes labels as std::string: a literal longer
/// than the small-string buffer would allocate at every launch, and the hot path must not.
#define OMGS_LABEL(text)                             \
  ([]() -> const std::string& {                      \
    static const std::string omgs_label_text_(text); \
    return omgs_label_text_;                         \
  }())

namespace detail {

/// The execution space's concurrency, read once per process. Kokkos 4 (with
/// KOKKOS_ENABLE_DEPRECATED_CODE_4, its default) only has the static
/// ExecSpace::concurrency(const ExecSpace& = ExecSpace()): every call default-constructs an
/// instance, which heap-allocates its shared-pointer control block on the host back-ends.
template <class ExecSpace>
int cached_concurrency(const ExecSpace& exec) {
  static const int c = exec.concurrency();
  return c > 0 ? c : 1;
}

/// RangePolicy [begin, end) on exec with the chunk size Kokkos would pick (its
/// set_auto_chunk_size), without its per-policy call to concurrency() (see above).
template <class ExecSpace>
Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>> range_policy(const ExecSpace& exec,
                                                                             std::int64_t begin,
                                                                             std::int64_t end) {
  const std::int64_t conc = cached_concurrency(exec), n = end - begin;
  std::int64_t chunk = 1;
  while (chunk * 100 * conc < n) chunk *= 2;
  if (chunk < 128) {
    chunk = 1;
    while (chunk * 40 * conc < n && chunk < 128) chunk *= 2;
  }
  return Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(
      exec, begin, end, Kokkos::ChunkSize(static_cast<int>(chunk)));
}

/// exec.fence() without heap allocation: Kokkos >= 3.5 copies the fence label into a
/// std::string (Kokkos::Tools::beginFence takes it by value) and the default label is longer
/// than the small-string buffer; this static label fits in it.
template <class ExecSpace>
void fence(const ExecSpace& exec) {
#if KOKKOS_VERSION >= 30500
  exec.fence(OMGS_LABEL("omgs::fence"));
#else
  exec.fence();
#endif
}

/// Sets every entry of a 1-D view to zero (Kokkos::deep_copy(view, 0) builds its own label
/// string at every call).
template <class View>
struct FillZero {
  View v;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    v(i) = typename View::non_const_value_type(0);
  }
};

template <class ExecSpace, class View>
void fill_zero(const ExecSpace& exec, const View& v) {
  Kokkos::parallel_for(OMGS_LABEL("omgs::zero"),
                       range_policy(exec, 0, static_cast<std::int64_t>(v.extent(0))),
                       FillZero<View>{v});
}

}  // namespace detail
}  // namespace omgs
