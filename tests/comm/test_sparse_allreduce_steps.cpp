// The sparse allreduce's host-side steps, without MPI (detail/sparse_allreduce_steps.hpp).
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

TEST_CASE("balanced_bounds give each region about the same number of the last result") {
  std::vector<SparsePair> sorted;
  for (std::uint32_t i = 0; i < 100; ++i) sorted.push_back({i, 1.0f});  // all in [0, 100)
  const auto b = sa::balanced_bounds(sorted, 1000000, 4);
  CHECK(b == std::vector<std::uint64_t>{0, 25, 50, 75, 1000000});
  // Fewer entries than ranks: even bounds.
  CHECK(sa::balanced_bounds({{5, 1.0f}}, 100, 4) == sa::even_bounds(100, 4));
  // Into a vector that has the room: the same bounds, no reallocation.
  std::vector<std::uint64_t> into(5, 7);
  const std::uint64_t* before = into.data();
  sa::balanced_bounds(sorted, 1000000, 4, into);
  CHECK(into == b);
  sa::balanced_bounds({{5, 1.0f}}, 100, 4, into);
  CHECK(into == sa::even_bounds(100, 4));
  CHECK(into.data() == before);
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
    sa::select_at_or_above(reduced, sa::threshold_key(pick, fine), kept);
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
  sa::select_at_or_above(reduced, sa::threshold_key(all, fine), kept);
  CHECK(kept.size() == 3u);
  const sa::CoarsePick none = sa::pick_coarse(coarse, 0);
  CHECK(none.keep_none);
  sa::select_at_or_above(reduced, sa::threshold_key(none, fine), kept);
  CHECK(kept.empty());
  const sa::CoarsePick one = sa::pick_coarse(coarse, 1);
  sa::histogram(reduced, true, one.bin, fine);
  sa::select_at_or_above(reduced, sa::threshold_key(one, fine), kept);
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
