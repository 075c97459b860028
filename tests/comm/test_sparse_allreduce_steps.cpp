// The sparse allreduce's host-side steps, without MPI (detail/sparse_allreduce_steps.hpp).
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include <omgs/error.hpp>

#include "omgs_catch.hpp"

namespace sa = omgs::detail::sparse_allreduce;
using omgs::SparsePair;

TEST_CASE("even_bounds cut [0, n) into P regions that differ by at most one") {
  for (std::uint64_t n : {0ull, 1ull, 7ull, 1000ull, (1ull << 32)})
    for (int p : {1, 2, 3, 8, 16}) {
      const auto b = sa::even_bounds(n, p);
      REQUIRE(b.size() == static_cast<std::size_t>(p) + 1);
      CHECK(b.front() == 0);
      CHECK(b.back() == n);
      for (int r = 0; r < p; ++r) {
        CHECK(b[r + 1] >= b[r]);
        CHECK(b[r + 1] - b[r] <= n / static_cast<std::uint64_t>(p) + 1);
      }
    }
}

TEST_CASE("IndexPermutation is a bijection of [0, n) and inverse undoes it") {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 7ull, 1000ull, 65537ull, (1ull << 20) + 3}) {
    INFO("n " << n);
    const sa::IndexPermutation perm(n);
    std::vector<bool> hit(static_cast<std::size_t>(n), false);
    bool ok = true;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t j = perm.forward(i);
      ok = ok && j < n && !hit[static_cast<std::size_t>(j)] && perm.inverse(j) == i;
      if (j < n) hit[static_cast<std::size_t>(j)] = true;
    }
    CHECK(ok);
    CHECK(perm.forward(n + 5) == n + 5);  // outside the group: unchanged
    CHECK(perm.inverse(n) == n);
  }
  // The largest group (2^32 elements): some indices, the ends included.
  const sa::IndexPermutation big(1ull << 32);
  for (std::uint64_t i : {0ull, 1ull, 12345678ull, (1ull << 31), (1ull << 32) - 1}) {
    CHECK(big.forward(i) < (1ull << 32));
    CHECK(big.inverse(big.forward(i)) == i);
  }
  // Not the identity (a bijection that moved nothing would spread nothing).
  const sa::IndexPermutation p(1000000);
  int moved = 0;
  for (std::uint64_t i = 0; i < 100; ++i) moved += p.forward(i) != i;
  CHECK(moved > 90);
}

TEST_CASE("IndexPermutation spreads contiguous and strided index sets over even regions") {
  const std::uint64_t n = 10000000;
  const int ranks = 16;
  const sa::IndexPermutation perm(n);
  const auto bounds = sa::even_bounds(n, ranks);
  // 8000 indices each: a hot range at the start (an embedding's frequent rows), one in the
  // middle, and strides of matrix rows (64, 768, 4096) and of a Fibonacci number (1597, the
  // golden-ratio multiplier's weak spot, which a multiplicative hash alone would not spread).
  for (const auto& [start, stride] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {0, 1}, {5000000, 1}, {3, 64}, {11, 768}, {0, 4096}, {7, 1597}}) {
    INFO("start " << start << ", stride " << stride);
    std::vector<int> per_region(ranks, 0);
    for (std::uint64_t i = 0; i < 8000; ++i) {
      const std::uint64_t j = perm.forward((start + i * stride) % n);  // the group's indices
      REQUIRE(j < n);
      ++per_region[static_cast<std::size_t>(std::upper_bound(bounds.begin() + 1, bounds.end(), j) -
                                            (bounds.begin() + 1))];
    }
    const int busiest = *std::max_element(per_region.begin(), per_region.end());
    CHECK(busiest <= 8000 / ranks * 12 / 10);  // within 1.2x of the mean (500)
  }
}

TEST_CASE("sort_by_index sorts distinct indices, small and large, without reallocating") {
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{5}, std::size_t{511}, std::size_t{512}, std::size_t{40000}}) {
    INFO("count " << count);
    const sa::IndexPermutation perm(1ull << 32);  // distinct indices over all 32 bits
    std::vector<SparsePair> pairs, scratch;
    for (std::size_t i = 0; i < count; ++i)
      pairs.push_back({static_cast<std::uint32_t>(perm.forward(i * 7919)), float(i)});
    std::vector<SparsePair> expect = pairs;
    std::sort(expect.begin(), expect.end(),
              [](const SparsePair& a, const SparsePair& b) { return a.index < b.index; });
    scratch.reserve(count);
    const SparsePair* before = pairs.data();
    sa::sort_by_index(pairs, scratch);
    CHECK(pairs.data() == before);
    REQUIRE(pairs.size() == expect.size());
    bool same = true;
    for (std::size_t i = 0; i < count; ++i)
      same = same && pairs[i].index == expect[i].index && pairs[i].value == expect[i].value;
    CHECK(same);
  }
}

TEST_CASE("bin_by_region groups pairs by region, stably, empty regions included") {
  const std::vector<std::uint64_t> bounds = {0, 10, 10, 20, 30};  // region 1 is empty
  const std::vector<SparsePair> pairs = {{25, 1}, {3, 2}, {10, 3}, {0, 4}, {19, 5}, {29, 6}};
  std::vector<SparsePair> out;
  std::vector<int> counts;
  sa::bin_by_region(pairs.data(), pairs.size(), bounds, out, counts);
  CHECK(counts == std::vector<int>{2, 0, 2, 2});
  std::vector<std::uint32_t> order;
  for (const SparsePair& p : out) order.push_back(p.index);
  CHECK(order == std::vector<std::uint32_t>{3, 0, 10, 19, 25, 29});
  const std::vector<SparsePair> bad = {{1, 1}, {30, 1}};
  CHECK_THROWS_WITH(sa::bin_by_region(bad.data(), bad.size(), bounds, out, counts),
                    Catch::Contains("pair 1 has index 30, not below the group's 30 elements"));
}

TEST_CASE("reduce_by_index sums equal indices in rank order and sorts") {
  std::vector<SparsePair> received = {{7, 1.0f}, {2, 2.0f}, {7, 1e-8f}, {2, -2.0f}, {9, 3.0f}};
  std::vector<SparsePair> out;
  sa::reduce_by_index(received, out);
  REQUIRE(out.size() == 3u);
  CHECK(out[0].index == 2);
  CHECK(out[0].value == 0.0f);
  CHECK(out[1].index == 7);
  CHECK(out[1].value == 1.0f + 1e-8f);  // in arrival order: the same float operations
  CHECK(out[2].index == 9);
  // With its scratch: the same sums, in the same order, the input left as it was.
  const std::vector<SparsePair> again = {{7, 1.0f}, {2, 2.0f}, {7, 1e-8f}, {2, -2.0f}, {9, 3.0f}};
  std::vector<SparsePair> out2;
  std::vector<std::uint64_t> keys;
  sa::reduce_by_index(again, out2, keys);
  REQUIRE(out2.size() == 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(out2[i].index == out[i].index);
    CHECK(out2[i].value == out[i].value);
  }
  CHECK(again[0].index == 7);
}

TEST_CASE("fold_by_index over batches of ranks gives reduce_by_index's sums bit for bit") {
  // 8 ranks' pairs over 50 indices (many shared), magnitudes far apart so that any other
  // order of the additions rounds differently; -0.0f first for one index (0.0f + -0.0f
  // would be +0.0f: the fold must start from the first value, not add it to zero).
  std::mt19937 gen(48);
  std::uniform_int_distribution<std::uint32_t> index(0, 49);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::vector<std::vector<SparsePair>> ranks(8);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (int i = 0; i < 20; ++i)
      ranks[r].push_back({index(gen), std::ldexp(mantissa(gen), static_cast<int>(i % 30) - 10)});
  ranks[0].push_back({50, -0.0f});
  std::vector<SparsePair> all, reference;
  for (const auto& r : ranks) all.insert(all.end(), r.begin(), r.end());
  sa::reduce_by_index(all, reference);
  for (const std::size_t per_batch : {std::size_t{1}, std::size_t{3}, std::size_t{8}}) {
    std::vector<SparsePair> reduced, scratch, batch;
    std::vector<std::uint64_t> keys;
    for (std::size_t first = 0; first < ranks.size(); first += per_batch) {
      batch.clear();
      for (std::size_t r = first; r < std::min(ranks.size(), first + per_batch); ++r)
        batch.insert(batch.end(), ranks[r].begin(), ranks[r].end());
      sa::fold_by_index(batch.data(), batch.size(), reduced, keys, scratch);
    }
    REQUIRE(reduced.size() == reference.size());
    for (std::size_t i = 0; i < reduced.size(); ++i) {
      CHECK(reduced[i].index == reference[i].index);
      CHECK(std::memcmp(&reduced[i].value, &reference[i].value, sizeof(float)) == 0);
    }
    CHECK(std::signbit(reduced.back().value));  // index 50: -0.0f kept
  }
}

TEST_CASE("the threshold keeps the k largest magnitudes and the ties of the last fine bin") {
  std::vector<SparsePair> reduced;
  for (std::uint32_t i = 0; i < 1000; ++i)
    reduced.push_back({i, (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i + 1) * 0.37f});
  for (std::uint64_t k : {1ull, 10ull, 100ull, 999ull}) {
    std::vector<std::int64_t> coarse, fine;
    sa::histogram(reduced, false, 0, coarse);
    const sa::CoarsePick pick = sa::pick_coarse(coarse, k);
    REQUIRE_FALSE(pick.keep_all);
    sa::histogram(reduced, true, pick.bin, fine);
    std::vector<SparsePair> kept;
    sa::select_at_or_above(reduced, sa::cut_of(pick, fine).key, kept);
    // Distinct magnitudes 0.37 apart: the fine bins are narrower, so exactly k survive.
    CHECK(kept.size() == k);
    for (const SparsePair& p : kept) CHECK(p.index >= 1000 - k);
  }
}

TEST_CASE("the threshold keeps all when fewer than k, none when k is 0, NaN always") {
  const std::vector<SparsePair> reduced = {
      {0, 1.0f}, {1, -0.5f}, {2, std::numeric_limits<float>::quiet_NaN()}};
  std::vector<std::int64_t> coarse, fine;
  sa::histogram(reduced, false, 0, coarse);
  std::vector<SparsePair> kept;
  const sa::CoarsePick all = sa::pick_coarse(coarse, 5);
  CHECK(all.keep_all);
  sa::select_at_or_above(reduced, sa::cut_of(all, fine).key, kept);
  CHECK(kept.size() == 3u);
  const sa::CoarsePick none = sa::pick_coarse(coarse, 0);
  CHECK(none.keep_none);
  sa::select_at_or_above(reduced, sa::cut_of(none, fine).key, kept);
  CHECK(kept.empty());
  const sa::CoarsePick one = sa::pick_coarse(coarse, 1);
  sa::histogram(reduced, true, one.bin, fine);
  sa::select_at_or_above(reduced, sa::cut_of(one, fine).key, kept);
  REQUIRE(kept.size() == 1u);
  CHECK(kept[0].index == 2);  // the NaN ranks above every number
}

TEST_CASE("pick_bin finds the bin holding the want-th largest") {
  std::vector<std::int64_t> hist(sa::hist_bins, 0);
  hist[10] = 5;
  hist[20] = 3;
  std::int64_t above = -1;
  CHECK(sa::pick_bin(hist, 3, above) == 20);
  CHECK(above == 0);
  CHECK(sa::pick_bin(hist, 4, above) == 10);
  CHECK(above == 3);
  CHECK(sa::pick_bin(hist, 9, above) == -1);
  CHECK(above == 8);
}

TEST_CASE("not_among returns the own pairs whose index did not survive") {
  const std::vector<SparsePair> own = {{1, 1}, {5, 2}, {9, 3}};
  const std::vector<SparsePair> survivors = {{0, 7}, {5, 8}, {8, 9}};
  std::vector<SparsePair> out;
  sa::not_among(own.data(), own.size(), survivors, out);
  REQUIRE(out.size() == 2u);
  CHECK(out[0].index == 1);
  CHECK(out[1].index == 9);
  CHECK(out[1].value == 3.0f);
}

TEST_CASE("region_quota shares the needed ties by region: at most needed + P - 1 in all") {
  sa::Cut cut;
  cut.needed = 3;
  cut.in_bin = 10;
  CHECK(sa::region_quota(cut, 0) == 0);
  CHECK(sa::region_quota(cut, 4) == 2);  // ceil(3 * 4 / 10)
  CHECK(sa::region_quota(cut, 3) == 1);  // ceil(0.9)
  CHECK(sa::region_quota(cut, 10) == 3);
  // Every split of 10 in-bin entries over up to 8 regions: needed <= sum <= needed + P - 1.
  std::mt19937 gen(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int regions = 1 + trial % 8;
    std::vector<std::int64_t> mine(static_cast<std::size_t>(regions), 0);
    cut.in_bin = 1 + trial;
    cut.needed = 1 + trial % cut.in_bin;
    for (std::int64_t e = 0; e < cut.in_bin; ++e) ++mine[gen() % mine.size()];
    std::int64_t sum = 0;
    for (const std::int64_t m : mine) {
      CHECK(sa::region_quota(cut, m) <= m);
      sum += sa::region_quota(cut, m);
    }
    CHECK(sum >= cut.needed);
    CHECK(sum <= cut.needed + regions - 1);
  }
  cut.needed = cut.in_bin = 7;  // every in-bin entry needed: all of them
  CHECK(sa::region_quota(cut, 5) == 5);
  // The largest counts a group of 2^32 elements has: no overflow.
  cut.in_bin = std::int64_t{1} << 32;
  cut.needed = cut.in_bin - 1;
  CHECK(sa::region_quota(cut, cut.in_bin) == cut.needed);
  CHECK(sa::region_quota(cut, 1) == 1);
}

TEST_CASE("select_cut: equal magnitudes in every region keep k + P - 1 at most, lowest first") {
  // 8 regions of 1000 sums each, every magnitude 1.0 (signs alternate): one fine bin holds
  // them all. The histograms summed as the ranks sum them.
  const int regions = 8;
  std::vector<std::vector<SparsePair>> region(regions);
  for (int r = 0; r < regions; ++r)
    for (std::uint32_t i = 0; i < 1000; ++i)
      region[static_cast<std::size_t>(r)].push_back(
          {static_cast<std::uint32_t>(r) * 1000 + i, i % 2 ? -1.0f : 1.0f});
  region[3].resize(10);  // uneven regions: 10 in-bin entries there
  std::vector<SparsePair> scratch;
  for (std::uint64_t k : {1ull, 7ull, 100ull, 5000ull, 7010ull}) {
    INFO("k " << k);
    std::vector<std::int64_t> coarse(sa::hist_bins, 0), fine(sa::hist_bins, 0), h;
    for (const auto& reduced : region) {
      sa::histogram(reduced, false, 0, h);
      for (int b = 0; b < sa::hist_bins; ++b) coarse[b] += h[b];
    }
    const sa::CoarsePick pick = sa::pick_coarse(coarse, k);
    for (const auto& reduced : region) {
      sa::histogram(reduced, true, pick.bin, h);
      for (int b = 0; b < sa::hist_bins; ++b) fine[b] += h[b];
    }
    const sa::Cut cut = sa::cut_of(pick, fine);
    CHECK(cut.key == sa::magnitude_key(1.0f) >> sa::fine_shift << sa::fine_shift);
    CHECK(cut.whole == cut.key + (1u << sa::fine_shift));
    CHECK(cut.in_bin == 7010);
    CHECK(cut.needed == static_cast<std::int64_t>(k));
    std::size_t total = 0;
    for (const auto& reduced : region) {
      std::vector<SparsePair> kept;
      sa::select_cut(reduced, cut, kept, scratch);
      CHECK(static_cast<std::int64_t>(kept.size()) ==
            sa::region_quota(cut, static_cast<std::int64_t>(reduced.size())));
      for (std::size_t i = 0; i < kept.size(); ++i)  // ties: the lowest indices, in order
        CHECK(kept[i].index == reduced[i].index);
      total += kept.size();
    }
    CHECK(total >= k);
    CHECK(total <= k + regions - 1);
    CHECK(total <= sa::max_survivors(8010, k, regions));
  }
}

TEST_CASE("select_cut keeps every entry above the fine bin and its quota's largest in it") {
  // 5 entries above the bin; 6 in it, of three magnitudes inside the one fine bin
  // (1.0 and the next floats: 2^-23 apart, the bin is 2^-12 wide); some below.
  const float one = 1.0f, up1 = std::nextafter(one, 2.0f), up2 = std::nextafter(up1, 2.0f);
  std::vector<SparsePair> reduced = {{0, one},   {1, 4.0f}, {2, -up2}, {3, 0.5f}, {4, one},
                                     {5, 3.0f},  {6, up1},  {7, 5.0f}, {8, -up2}, {9, 0.25f},
                                     {10, 6.0f}, {11, one}, {12, 7.0f}};
  std::vector<std::int64_t> coarse, fine;
  sa::histogram(reduced, false, 0, coarse);
  const sa::CoarsePick pick = sa::pick_coarse(coarse, 8);  // 5 above, 3 of the 6 ties
  sa::histogram(reduced, true, pick.bin, fine);
  const sa::Cut cut = sa::cut_of(pick, fine);
  CHECK(cut.in_bin == 6);
  CHECK(cut.needed == 3);
  std::vector<SparsePair> kept, scratch;
  sa::select_cut(reduced, cut, kept, scratch);  // one region: its quota is exactly 3
  std::vector<std::uint32_t> idx;
  for (const SparsePair& p : kept) idx.push_back(p.index);
  // The two up2 (2, 8), then up1 (6): the largest in the bin; the 1.0s (0, 4, 11) stay.
  CHECK(idx == std::vector<std::uint32_t>{1, 2, 5, 6, 7, 8, 10, 12});
  // The same with the whole bin needed: every tie kept, as select_at_or_above does.
  const sa::CoarsePick all = sa::pick_coarse(coarse, 11);
  sa::histogram(reduced, true, all.bin, fine);
  sa::select_cut(reduced, sa::cut_of(all, fine), kept, scratch);
  std::vector<SparsePair> at_or_above;
  sa::select_at_or_above(reduced, sa::cut_of(all, fine).key, at_or_above);
  CHECK(kept.size() == 11u);
  CHECK(at_or_above.size() == 11u);
  // keep_all and keep_none.
  sa::select_cut(reduced, sa::cut_of(sa::pick_coarse(coarse, 100), fine), kept, scratch);
  CHECK(kept.size() == reduced.size());
  sa::select_cut(reduced, sa::cut_of(sa::pick_coarse(coarse, 0), fine), kept, scratch);
  CHECK(kept.empty());
}

TEST_CASE("max_survivors is min(n, k + P - 1), 0 for k = 0") {
  CHECK(sa::max_survivors(100, 0, 8) == 0u);
  CHECK(sa::max_survivors(100, 10, 1) == 10u);
  CHECK(sa::max_survivors(100, 10, 8) == 17u);
  CHECK(sa::max_survivors(12, 10, 8) == 12u);
  CHECK(sa::max_survivors(5, 10, 1) == 5u);
  CHECK(sa::max_survivors(1ull << 32, 1, 4096) == 4096u);
  CHECK(sa::max_survivors(UINT64_MAX, UINT64_MAX - 1, 4096) == UINT64_MAX);
}
