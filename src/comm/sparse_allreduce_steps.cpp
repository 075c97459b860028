// The sparse allreduce's host-side steps (include/omgs/detail/sparse_allreduce_steps.hpp).
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <omgs/error.hpp>

namespace omgs::detail::sparse_allreduce {

namespace {

void fill_even(std::uint64_t n, std::uint64_t p, std::vector<std::uint64_t>& b) {
  b.resize(p + 1);
  // n / p * r + the remainder's share, without n * r overflowing for n near 2^64.
  for (std::uint64_t r = 0; r <= p; ++r) b[r] = n / p * r + n % p * r / p;
}

}  // namespace

std::vector<std::uint64_t> even_bounds(std::uint64_t n, int ranks) {
  std::vector<std::uint64_t> b;
  fill_even(n, static_cast<std::uint64_t>(std::max(1, ranks)), b);
  return b;
}

void balanced_bounds(const std::vector<SparsePair>& sorted, std::uint64_t n, int ranks,
                     std::vector<std::uint64_t>& b) {
  const auto p = static_cast<std::size_t>(std::max(1, ranks));
  if (sorted.size() < p) return fill_even(n, p, b);
  b.resize(p + 1);
  b[0] = 0;
  b[p] = n;
  for (std::size_t r = 1; r < p; ++r) b[r] = sorted[r * sorted.size() / p].index;
}

std::vector<std::uint64_t> balanced_bounds(const std::vector<SparsePair>& sorted, std::uint64_t n,
                                           int ranks) {
  std::vector<std::uint64_t> b;
  balanced_bounds(sorted, n, ranks, b);
  return b;
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

std::uint32_t threshold_key(const CoarsePick& pick, const std::vector<std::int64_t>& fine_hist) {
  if (pick.keep_all) return 0;
  if (pick.keep_none) return 0xffffffffu;  // above every key (keys have no sign bit)
  std::int64_t above = 0;
  const int fine = pick_bin(fine_hist, pick.want_in_bin, above);
  // The coarse bin holds at least want_in_bin entries, so fine >= 0; 0 guards a peer's bug.
  const auto f = static_cast<std::uint32_t>(std::max(0, fine));
  return (pick.bin << coarse_shift) | (f << fine_shift);
}

void select_at_or_above(const std::vector<SparsePair>& reduced, std::uint32_t threshold,
                        std::vector<SparsePair>& out) {
  out.clear();
  for (const SparsePair& p : reduced)
    if (magnitude_key(p.value) >= threshold) out.push_back(p);
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
