// The sparse allreduce's host-side steps (include/omgs/detail/sparse_allreduce_steps.hpp).
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <omgs/error.hpp>

namespace omgs::detail::sparse_allreduce {

namespace {

// Odd multipliers (MurmurHash3's finalizer's): odd, so invertible modulo any power of two.
constexpr std::uint64_t kMul1 = 0xff51afd7ed558ccdull, kMul2 = 0xc4ceb9fe1a85ec53ull;

/// c^-1 modulo 2^64 for odd c (Newton's iteration doubles the correct low bits each step).
constexpr std::uint64_t inverse_odd(std::uint64_t c) {
  std::uint64_t x = c;  // correct to 3 bits: c * c = 1 mod 8 for odd c
  for (int i = 0; i < 5; ++i) x *= 2 - c * x;
  return x;
}

}  // namespace

std::vector<std::uint64_t> even_bounds(std::uint64_t n, int ranks) {
  const auto p = static_cast<std::uint64_t>(std::max(1, ranks));
  std::vector<std::uint64_t> b(p + 1);
  // n / p * r + the remainder's share, without n * r overflowing for n near 2^64.
  for (std::uint64_t r = 0; r <= p; ++r) b[r] = n / p * r + n % p * r / p;
  return b;
}

IndexPermutation::IndexPermutation(std::uint64_t n) noexcept : n_(n) {
  while (bits_ < 64 && (std::uint64_t{1} << bits_) < n) ++bits_;
  mask_ = bits_ >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits_) - 1;
  shift_ = std::max(1, (bits_ + 1) / 2);
}

std::uint64_t IndexPermutation::mix(std::uint64_t x) const noexcept {
  x ^= x >> shift_;
  x = (x * kMul1) & mask_;
  x ^= x >> shift_;
  x = (x * kMul2) & mask_;
  return x ^ (x >> shift_);
}

std::uint64_t IndexPermutation::unmix(std::uint64_t x) const noexcept {
  // y ^ (y >> s) = x: each pass fixes s more of y's bits from the top.
  const auto unshift = [this](std::uint64_t v) {
    std::uint64_t y = v;
    for (int done = shift_; done < bits_; done += shift_) y = v ^ (y >> shift_);
    return y;
  };
  constexpr std::uint64_t inv1 = inverse_odd(kMul1), inv2 = inverse_odd(kMul2);
  x = unshift(x);
  x = (x * inv2) & mask_;
  x = unshift(x);
  x = (x * inv1) & mask_;
  return unshift(x);
}

std::uint64_t IndexPermutation::forward(std::uint64_t i) const noexcept {
  if (i >= n_) return i;
  // mix permutes [0, 2^bits); following i's cycle to the next value below n permutes [0, n).
  do i = mix(i);
  while (i >= n_);
  return i;
}

std::uint64_t IndexPermutation::inverse(std::uint64_t j) const noexcept {
  if (j >= n_) return j;
  do j = unmix(j);
  while (j >= n_);
  return j;
}

void bin_by_region(const SparsePair* pairs, std::size_t count,
                   const std::vector<std::uint64_t>& bounds, std::vector<SparsePair>& out,
                   std::vector<int>& counts) {
  const std::size_t regions = bounds.size() - 1;
  counts.assign(regions, 0);
  // The region r with bounds[r] <= idx < bounds[r + 1] (empty regions are skipped).
  auto region_of = [&bounds](std::uint64_t idx) {
    return static_cast<std::size_t>(std::upper_bound(bounds.begin() + 1, bounds.end(), idx) -
                                    (bounds.begin() + 1));
  };
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t idx = pairs[i].index;
    if (idx >= bounds.back())
      throw Error("omgs: sparse allreduce: pair " + std::to_string(i) + " has index " +
                  std::to_string(idx) + ", not below the group's " + std::to_string(bounds.back()) +
                  " elements");
    ++counts[region_of(idx)];
  }
  // No scratch (the progress thread's exchanges must not allocate once warm): counts become
  // each region's start, then its end as it fills, then its count again.
  int at = 0;
  for (int& c : counts) at += std::exchange(c, at);
  out.resize(count);
  for (std::size_t i = 0; i < count; ++i)
    out[static_cast<std::size_t>(counts[region_of(pairs[i].index)]++)] = pairs[i];
  for (std::size_t r = regions; r-- > 1;) counts[r] -= counts[r - 1];
}

void reduce_by_index(const std::vector<SparsePair>& received, std::vector<SparsePair>& out,
                     std::vector<std::uint64_t>& keys) {
  // Sorted by (index, position): equal indices in the order received, i.e. rank order,
  // without std::stable_sort's temporary buffer.
  keys.resize(received.size());
  for (std::size_t i = 0; i < received.size(); ++i)
    keys[i] = std::uint64_t{received[i].index} << 32 | i;
  std::sort(keys.begin(), keys.end());
  out.clear();
  for (const std::uint64_t key : keys) {
    const SparsePair& p = received[static_cast<std::size_t>(key & 0xffffffffu)];
    if (!out.empty() && out.back().index == p.index)
      out.back().value += p.value;
    else
      out.push_back(p);
  }
}

void reduce_by_index(std::vector<SparsePair>& received, std::vector<SparsePair>& out) {
  std::vector<std::uint64_t> keys;
  reduce_by_index(received, out, keys);
}

void fold_by_index(const SparsePair* batch, std::size_t count, std::vector<SparsePair>& reduced,
                   std::vector<std::uint64_t>& keys, std::vector<SparsePair>& scratch) {
  keys.resize(count);  // (index, position): equal indices in batch order, as reduce_by_index
  for (std::size_t i = 0; i < count; ++i) keys[i] = std::uint64_t{batch[i].index} << 32 | i;
  std::sort(keys.begin(), keys.end());
  scratch.clear();
  auto r = reduced.cbegin();
  for (const std::uint64_t key : keys) {
    const SparsePair& p = batch[static_cast<std::size_t>(key & 0xffffffffu)];
    for (; r != reduced.cend() && r->index < p.index; ++r) scratch.push_back(*r);
    if (!scratch.empty() && scratch.back().index == p.index) {
      scratch.back().value += p.value;
    } else if (r != reduced.cend() && r->index == p.index) {
      scratch.push_back(*r++);  // the earlier ranks' sum first, then this rank's value
      scratch.back().value += p.value;
    } else {
      scratch.push_back(p);
    }
  }
  scratch.insert(scratch.end(), r, reduced.cend());
  reduced.swap(scratch);
}

void histogram(const std::vector<SparsePair>& reduced, bool fine, std::uint32_t coarse,
               std::vector<std::int64_t>& hist) {
  hist.assign(hist_bins, 0);
  for (const SparsePair& p : reduced) {
    const std::uint32_t key = magnitude_key(p.value);
    if (!fine)
      ++hist[key >> coarse_shift];
    else if ((key >> coarse_shift) == coarse)
      ++hist[(key >> fine_shift) & (hist_bins - 1)];
  }
}

int pick_bin(const std::vector<std::int64_t>& hist, std::int64_t want, std::int64_t& above) {
  std::int64_t sum = 0;
  for (int b = static_cast<int>(hist.size()); b-- > 0;) {
    above = sum;
    sum += hist[static_cast<std::size_t>(b)];
    if (sum >= want) return b;
  }
  above = sum;
  return -1;
}

CoarsePick pick_coarse(const std::vector<std::int64_t>& coarse_hist, std::uint64_t k) {
  CoarsePick pick;
  if (k == 0) {
    pick.keep_none = true;
    return pick;
  }
  std::int64_t above = 0;
  const int b = pick_bin(coarse_hist, static_cast<std::int64_t>(k), above);
  if (b < 0) {
    pick.keep_all = true;
    return pick;
  }
  pick.bin = static_cast<std::uint32_t>(b);
  pick.want_in_bin = static_cast<std::int64_t>(k) - above;
  return pick;
}

Cut cut_of(const CoarsePick& pick, const std::vector<std::int64_t>& fine_hist) {
  Cut cut;  // keep_all: key = whole = 0, every entry survives
  if (pick.keep_all) return cut;
  if (pick.keep_none) {  // above every key (keys have no sign bit)
    cut.key = cut.whole = 0xffffffffu;
    return cut;
  }
  std::int64_t above = 0;
  const int fine = pick_bin(fine_hist, pick.want_in_bin, above);
  if (fine < 0) {  // the coarse bin holds want_in_bin entries: only a peer's bug gets here
    cut.key = cut.whole = pick.bin << coarse_shift;
    return cut;
  }
  cut.key = (pick.bin << coarse_shift) | (static_cast<std::uint32_t>(fine) << fine_shift);
  cut.whole = cut.key + (1u << fine_shift);  // at most 2^31: the keys have no sign bit
  cut.in_bin = fine_hist[static_cast<std::size_t>(fine)];
  cut.needed = pick.want_in_bin - above;
  return cut;
}

std::int64_t region_quota(const Cut& cut, std::int64_t mine) {
  if (mine <= 0 || cut.needed <= 0) return 0;
  // in_bin counts distinct indices of a group of at most 2^32: needed < in_bin <= 2^32 and
  // m <= in_bin keep needed * m + in_bin - 1 below 2^64. Past that only a peer's bug: all.
  if (cut.needed >= cut.in_bin || cut.in_bin > (std::int64_t{1} << 32)) return mine;
  const auto in_bin = static_cast<std::uint64_t>(cut.in_bin);
  const auto m = static_cast<std::uint64_t>(std::min(mine, cut.in_bin));
  const std::uint64_t q = (static_cast<std::uint64_t>(cut.needed) * m + in_bin - 1) / in_bin;
  return std::min(mine, static_cast<std::int64_t>(q));
}

void select_cut(const std::vector<SparsePair>& reduced, const Cut& cut,
                std::vector<SparsePair>& out, std::vector<SparsePair>& scratch) {
  scratch.clear();
  for (const SparsePair& p : reduced) {
    const std::uint32_t key = magnitude_key(p.value);
    if (key >= cut.key && key < cut.whole) scratch.push_back(p);
  }
  const auto mine = static_cast<std::int64_t>(scratch.size());
  const std::int64_t quota = region_quota(cut, mine);
  if (quota >= mine) return select_at_or_above(reduced, cut.key, out);
  if (quota == 0) return select_at_or_above(reduced, cut.whole, out);
  // The largest magnitudes first, then the lower index: a total order (distinct indices), so
  // the quota-th in-bin entry, `edge`, and those before it are the owner's one choice.
  const auto before = [](const SparsePair& a, const SparsePair& b) {
    const std::uint32_t ka = magnitude_key(a.value), kb = magnitude_key(b.value);
    return ka != kb ? ka > kb : a.index < b.index;
  };
  const auto last = scratch.begin() + static_cast<std::ptrdiff_t>(quota - 1);
  std::nth_element(scratch.begin(), last, scratch.end(), before);
  const SparsePair edge = *last;
  out.clear();
  for (const SparsePair& p : reduced) {
    const std::uint32_t key = magnitude_key(p.value);
    if (key >= cut.whole || (key >= cut.key && !before(edge, p))) out.push_back(p);
  }
}

std::uint64_t max_survivors(std::uint64_t n, std::uint64_t k, std::uint64_t ranks) {
  if (k == 0) return 0;
  const std::uint64_t extra = ranks > 0 ? ranks - 1 : 0;  // one ceil's rounding per region
  return k >= n || extra >= n - k ? n : k + extra;
}

void select_at_or_above(const std::vector<SparsePair>& reduced, std::uint32_t threshold,
                        std::vector<SparsePair>& out) {
  out.clear();
  for (const SparsePair& p : reduced)
    if (magnitude_key(p.value) >= threshold) out.push_back(p);
}

void sort_by_index(std::vector<SparsePair>& pairs, std::vector<SparsePair>& scratch) {
  const auto by_index = [](const SparsePair& a, const SparsePair& b) { return a.index < b.index; };
  if (pairs.size() < 512) return std::sort(pairs.begin(), pairs.end(), by_index);
  scratch.resize(pairs.size());
  std::size_t count[256];
  std::vector<SparsePair>* from = &pairs;
  std::vector<SparsePair>* to = &scratch;
  for (int shift = 0; shift < 32; shift += 8) {  // 4 passes: the result ends in `pairs`
    std::fill(std::begin(count), std::end(count), std::size_t{0});
    for (const SparsePair& p : *from) ++count[(p.index >> shift) & 0xffu];
    std::size_t at = 0;
    for (std::size_t& c : count) at += std::exchange(c, at);
    for (const SparsePair& p : *from) (*to)[count[(p.index >> shift) & 0xffu]++] = p;
    std::swap(from, to);
  }
}

void not_among(const SparsePair* own, std::size_t count, const std::vector<SparsePair>& survivors,
               std::vector<SparsePair>& out) {
  out.clear();
  const auto less = [](const SparsePair& a, std::uint32_t i) { return a.index < i; };
  for (std::size_t i = 0; i < count; ++i) {
    const auto it = std::lower_bound(survivors.begin(), survivors.end(), own[i].index, less);
    if (it == survivors.end() || it->index != own[i].index) out.push_back(own[i]);
  }
}

}  // namespace omgs::detail::sparse_allreduce
