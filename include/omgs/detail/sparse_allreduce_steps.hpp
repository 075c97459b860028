// The host-side steps of the sparse allreduce (detail/sparse_allreduce.hpp), without MPI:
// the regions of a group's (permuted) index range, the reduction of the pairs a region's owner
// receives, the global magnitude threshold from two histograms, and the pairs a rank must take
// back.
//
// The threshold keeps about k entries of all ranks' reduced regions together: a coarse
// histogram of |value| (agreed over ranks by an allreduce) finds the bin that holds the k-th
// largest, a fine histogram of that bin alone finds it to 2^-11 of its magnitude; every
// entry above that fine bin survives, and of the fine bin's own entries (the ties, which can
// be every entry of a gradient of equal or zero magnitudes) each region keeps its share of
// the number still wanted (Cut): at most k + P - 1 survivors in all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/export.hpp>

namespace omgs::detail::sparse_allreduce {

/// Bins of each histogram: the coarse one is over the top 10 bits of |value|'s bits (sign
/// excluded: 8 exponent bits and 2 mantissa bits), the fine one over the next 10.
inline constexpr int hist_bins = 1024;
inline constexpr int coarse_shift = 21;
inline constexpr int fine_shift = 11;

/// |v|'s bits: ordered as |v| is (NaN above infinity, so it survives and is seen downstream).
inline std::uint32_t magnitude_key(float v) noexcept {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b & 0x7fffffffu;
}

/// Region r of [0, n) is [bounds[r], bounds[r + 1]); P + 1 bounds cutting it evenly.
OMGS_EXPORT std::vector<std::uint64_t> even_bounds(std::uint64_t n, int ranks);

/// A fixed pseudo-random permutation of [0, n), the same on every rank: the regions cut the
/// permuted indices, so that a few hot index ranges (an embedding's frequent rows, an output
/// layer) spread over every region instead of loading the one rank that owns them. A bijective
/// mix of the index's bits over the next power of two >= n (xor-shifts and multiplications by
/// odd constants), walked along its cycle until it falls below n (fewer than 2 steps on
/// average: the power of two is < 2 n).
class OMGS_EXPORT IndexPermutation {
 public:
  explicit IndexPermutation(std::uint64_t n) noexcept;
  /// The permuted index of i < n; i >= n is returned unchanged (so that a bad index is still
  /// reported as the caller passed it).
  std::uint64_t forward(std::uint64_t i) const noexcept;
  /// The index whose permuted index is j < n (j >= n: unchanged).
  std::uint64_t inverse(std::uint64_t j) const noexcept;

 private:
  std::uint64_t mix(std::uint64_t x) const noexcept;
  std::uint64_t unmix(std::uint64_t x) const noexcept;
  std::uint64_t n_ = 0, mask_ = 0;
  int bits_ = 0, shift_ = 1;
};

/// This rank's pairs grouped by region (stable), counts[r] of them for region r. Throws
/// omgs::Error naming the pair whose index is not below bounds.back().
OMGS_EXPORT void bin_by_region(const SparsePair* pairs, std::size_t count,
                               const std::vector<std::uint64_t>& bounds,
                               std::vector<SparsePair>& out, std::vector<int>& counts);

/// The pairs a region's owner received, in rank order, summed per index into `out`, sorted by
/// index. Equal indices are added in rank order, so the sums do not depend on timing.
OMGS_EXPORT void reduce_by_index(std::vector<SparsePair>& received, std::vector<SparsePair>& out);
/// The same with `keys` as scratch (no allocation once `keys` and `out` have the room; fewer
/// than 2^32 pairs).
OMGS_EXPORT void reduce_by_index(const std::vector<SparsePair>& received,
                                 std::vector<SparsePair>& out, std::vector<std::uint64_t>& keys);

/// Adds `batch[0, count)` (any order; equal indices in rank order, each rank's pairs after
/// those of the ranks before it) into `reduced` (sorted by index, distinct, the sums of the
/// earlier ranks' pairs): per index, reduced's sum plus the batch's values one by one, in
/// order. Folding every rank's pairs batch after batch in rank order gives reduce_by_index's
/// sums bit for bit, while only one batch and the sums are held (the region owner's memory
/// does not grow with the number of ranks). `keys` and `scratch` are its buffers (no
/// allocation once they have the room; count below 2^32).
OMGS_EXPORT void fold_by_index(const SparsePair* batch, std::size_t count,
                               std::vector<SparsePair>& reduced, std::vector<std::uint64_t>& keys,
                               std::vector<SparsePair>& scratch);

/// Histogram of `reduced`'s magnitudes: coarse (fine == false) over the top bits, or fine
/// over the next bits of the entries in coarse bin `coarse` only. `hist` gets hist_bins counts.
OMGS_EXPORT void histogram(const std::vector<SparsePair>& reduced, bool fine, std::uint32_t coarse,
                           std::vector<std::int64_t>& hist);

/// The highest bin b whose entries together with those above it number at least `want`
/// (`above`: those strictly above it); -1 if all bins together hold fewer.
OMGS_EXPORT int pick_bin(const std::vector<std::int64_t>& hist, std::int64_t want,
                         std::int64_t& above);

/// Where the threshold stands after the coarse histogram.
struct CoarsePick {
  bool keep_all = false;         ///< fewer than k entries in all: every one survives
  bool keep_none = false;        ///< k == 0
  std::uint32_t bin = 0;         ///< the coarse bin holding the k-th largest
  std::int64_t want_in_bin = 0;  ///< how many of that bin's entries are wanted
};
OMGS_EXPORT CoarsePick pick_coarse(const std::vector<std::int64_t>& coarse_hist, std::uint64_t k);

/// Where the survivors are cut, from the coarse pick and the fine histogram of its bin (both
/// summed over the ranks, so the same on every rank): every entry whose key is at or above
/// `whole` (the next fine bin's lower edge) survives, none below `key` (the threshold fine
/// bin's lower edge); of the `in_bin` entries of every region in [key, whole), `needed`
/// (= k minus those at or above `whole`, at least 1) are wanted. Each region's owner keeps a
/// share of its own in-bin entries (region_quota), so that the survivors of all regions
/// number at most k + P - 1 whatever the ties: a gradient of many equal (or zero) magnitudes
/// puts them all in one fine bin.
struct Cut {
  std::uint32_t key = 0, whole = 0;
  std::int64_t needed = 0, in_bin = 0;
};
OMGS_EXPORT Cut cut_of(const CoarsePick& pick, const std::vector<std::int64_t>& fine_hist);

/// How many of a region's `mine` in-bin entries survive: ceil(needed * mine / in_bin) (all
/// of them where every in-bin entry is needed). Over regions whose in-bin entries add up to
/// in_bin, the quotas add up to at most needed + P - 1 (each ceil adds less than one, and
/// they add an integer to the integer `needed`).
OMGS_EXPORT std::int64_t region_quota(const Cut& cut, std::int64_t mine);

/// The entries of `reduced` the cut keeps, in order: those at or above cut.whole, and of
/// those in [cut.key, cut.whole) the region_quota() largest magnitudes (ties: the lower
/// index first), so that the owner's choice is deterministic. `scratch` is its buffer (no
/// allocation once it has reduced's room).
OMGS_EXPORT void select_cut(const std::vector<SparsePair>& reduced, const Cut& cut,
                            std::vector<SparsePair>& out, std::vector<SparsePair>& scratch);

/// The most survivors an exchange of n elements, k selected, on `ranks` ranks can have over
/// all regions: min(n, k + P - 1) (0 for k = 0); at most P k, never growing as P k does.
OMGS_EXPORT std::uint64_t max_survivors(std::uint64_t n, std::uint64_t k, std::uint64_t ranks);

/// The entries of `reduced` whose magnitude key is >= threshold, in order.
OMGS_EXPORT void select_at_or_above(const std::vector<SparsePair>& reduced, std::uint32_t threshold,
                                    std::vector<SparsePair>& out);

/// Sorts `pairs` by index (distinct indices: a 4-pass LSD radix sort, O(n), for the survivors
/// mapped back from permuted indices), `scratch` its buffer (no allocation once it has the room).
OMGS_EXPORT void sort_by_index(std::vector<SparsePair>& pairs, std::vector<SparsePair>& scratch);

/// This rank's own pairs whose index is not among `survivors` (sorted by index): the
/// selection dropped them, and their values go back into this rank's residual.
OMGS_EXPORT void not_among(const SparsePair* own, std::size_t count,
                           const std::vector<SparsePair>& survivors, std::vector<SparsePair>& out);

}  // namespace omgs::detail::sparse_allreduce
