// Internal: an allgatherv of more items than one MPI call may count, as several posts of
// consecutive slices of the receive buffer (wire_allgatherv.cpp; docs/comm.md, "Large
// counts"). Rank r's items lie at [displs[r], displs[r] + counts[r]) of the receive buffer;
// post s fills its slice [s L, (s + 1) L) (L the limit): every rank's part of its items that
// lies in the slice, at displacements relative to the slice's start, so that no post counts
// or displaces past L. Every rank computes the same posts from the same counts, so their
// calls match; the pairs land where one unsplit call would put them. Pure C++: a unit test
// checks it without MPI.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace omgs::detail {

/// The posts of an allgatherv of `total` items in slices of at most `limit` >= 1 items (one,
/// of nothing, if total is 0).
inline std::uint64_t slice_posts(std::uint64_t total, std::uint64_t limit) noexcept {
  return total == 0 ? 1 : (total - 1) / limit + 1;
}

/// Post s of `ranks` ranks: each rank's count and displacement in it (C, D: the MPI call's
/// count and displacement types; every value <= limit), this rank's (`me`) count in
/// *mine, and where its part starts among its own items (returned).
template <class C, class D>
std::uint64_t slice_of(std::uint64_t s, std::uint64_t limit, const std::uint64_t* counts,
                       const std::uint64_t* displs, std::size_t ranks, std::size_t me,
                       C* out_counts, D* out_displs, C* mine) noexcept {
  const std::uint64_t begin = s * limit;
  const std::uint64_t end = limit > UINT64_MAX - begin ? UINT64_MAX : begin + limit;
  std::uint64_t from = 0;
  *mine = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::uint64_t a = std::max(displs[r], begin);
    const std::uint64_t b = std::min(displs[r] + counts[r], end);
    const std::uint64_t n = b > a ? b - a : 0;
    out_counts[r] = static_cast<C>(n);
    out_displs[r] = static_cast<D>(n > 0 ? a - begin : 0);
    if (r == me && n > 0) {
      *mine = static_cast<C>(n);
      from = a - displs[r];
    }
  }
  return from;
}

}  // namespace omgs::detail
