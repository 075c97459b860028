// The sparse allreduce (detail/sparse_allreduce.hpp) on 1..8 ranks: every rank ends with the
// same result, equal to a reference computed from every rank's pairs on one rank with the
// same selection, whether the fine histogram came seeded or in a round of its own; no mass
// is lost (survivors + every rank's dropped pairs = all pairs; over many iterations of error
// feedback in test_sparse_allreduce_wire.cpp); all pairs in a small index range, ranks with
// no pairs, k = 0; bad input and a rank that never starts.
#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include <omgs/error.hpp>

#include "omgs_catch.hpp"
#include "sparse_pairs_data.hpp"

namespace sa = omgs::detail::sparse_allreduce;
using omgs::SparsePair;
using omgs::detail::SparseAllreduce;

namespace {

using omgs_test::all_pairs;
using omgs_test::random_pairs;
using omgs_test::world_rank;
using omgs_test::world_size;

/// Checks one completed exchange of `mine` against the reference: the same sums (bit for
/// bit: the same additions in the same order), a threshold (every survivor's magnitude above
/// every dropped sum's, but for the ties of one fine bin, which the regions share), at least
/// min(k, distinct) survivors and at most k + P - 1, the extra ones in the k-th largest's fine
/// bin; dropped() exactly the own pairs not among them; the same result on every rank.
void check_result(const SparseAllreduce& ex, const std::vector<SparsePair>& mine, std::uint64_t k) {
  std::vector<SparsePair> all = all_pairs(mine), reference;
  sa::reduce_by_index(all, reference);
  const std::vector<SparsePair>& got = ex.survivors();
  std::map<std::uint32_t, float> sums;
  for (const SparsePair& p : reference) sums[p.index] = p.value;
  std::uint32_t min_kept = 0xffffffffu, max_dropped = 0;
  std::map<std::uint32_t, bool> kept;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i > 0) REQUIRE(got[i - 1].index < got[i].index);
    REQUIRE(sums.count(got[i].index) == 1);
    CHECK(got[i].value == sums[got[i].index]);
    kept[got[i].index] = true;
    min_kept = std::min(min_kept, sa::magnitude_key(got[i].value));
  }
  std::vector<std::uint32_t> keys;
  for (const SparsePair& p : reference) {
    keys.push_back(sa::magnitude_key(p.value));
    if (!kept.count(p.index)) max_dropped = std::max(max_dropped, keys.back());
  }
  std::sort(keys.rbegin(), keys.rend());
  CHECK(got.size() >= std::min<std::size_t>(k, reference.size()));
  CHECK(got.size() <= sa::max_survivors(reference.size(), k, world_size()));
  // A dropped sum above a kept one only within the threshold's fine bin (cut by region).
  if (!got.empty() && got.size() < reference.size())
    CHECK((max_dropped >> sa::fine_shift) <= (min_kept >> sa::fine_shift));
  if (k > 0 && got.size() > k)  // overshoot only by ties of the k-th largest's fine bin
    CHECK((min_kept >> sa::fine_shift) == (keys[k - 1] >> sa::fine_shift));
  std::vector<SparsePair> expect_dropped;
  for (const SparsePair& p : mine)
    if (!kept.count(p.index)) expect_dropped.push_back(p);
  REQUIRE(ex.dropped().size() == expect_dropped.size());
  for (std::size_t i = 0; i < expect_dropped.size(); ++i) {
    CHECK(ex.dropped()[i].index == expect_dropped[i].index);
    CHECK(ex.dropped()[i].value == expect_dropped[i].value);
  }
  // The same survivors on every rank: rank 0's, compared.
  CHECK(omgs_test::same_on_every_rank(got) == 1);
}

void run(SparseAllreduce& ex, const std::vector<SparsePair>& mine) {
  ex.start(mine.data(), mine.size());
  REQUIRE(ex.wait(60.0));
  CHECK(ex.phase() == SparseAllreduce::Phase::done);
}

}  // namespace

TEST_CASE("sparse allreduce equals the reference: random pairs, several k") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 100000;
  for (std::uint64_t k : {0ull, 1ull, 50ull, 500ull, 5000ull}) {
    INFO("k " << k << ", ranks " << p);
    SparseAllreduce ex(MPI_COMM_WORLD, n, k);
    for (int it = 0; it < 3; ++it) {  // the same object again: nothing left over
      const auto mine = random_pairs(400, 0, n, 1000u * it + static_cast<unsigned>(r));
      run(ex, mine);
      check_result(ex, mine, k);
      CHECK(ex.bounds() == sa::even_bounds(n, p));
      CHECK(ex.stats().survivors == ex.survivors().size());
    }
  }
}

TEST_CASE("sparse allreduce: all pairs in a small index range, ranks without pairs") {
  const int r = world_rank();
  const std::uint32_t n = 1000000;
  SparseAllreduce ex(MPI_COMM_WORLD, n, 64);
  // Every index in [0, 300), 0.03% of the group: the permuted regions each get some.
  auto mine = random_pairs(100, 0, 300, 7u + static_cast<unsigned>(r));
  run(ex, mine);
  check_result(ex, mine, 64);
  std::uint64_t fewest = ex.stats().region_pairs;
  MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  CHECK(fewest > 0);
  // Odd ranks contribute nothing.
  if (r % 2 == 1) mine.clear();
  run(ex, mine);
  check_result(ex, mine, 64);
  // The group's last indices.
  mine = random_pairs(50, n - 1000, n, 11u + static_cast<unsigned>(r));
  run(ex, mine);
  check_result(ex, mine, 64);
}

TEST_CASE("sparse allreduce: the last exchange's bin seeds the fine histogram, same result") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 100000;
  const std::uint64_t k = 50;
  SparseAllreduce ex(MPI_COMM_WORLD, n, k);
  auto mine = random_pairs(400, 0, n, 5u + static_cast<unsigned>(r));
  run(ex, mine);  // no seed yet: coarse, then fine, in two rounds
  check_result(ex, mine, k);
  CHECK(ex.stats().rounds == 4);
  const std::vector<SparsePair> first = ex.survivors();
  const std::uint64_t two_rounds_bytes = ex.stats().bytes_received;
  run(ex, mine);  // the same bin: its fine histogram came with the coarse one
  check_result(ex, mine, k);
  CHECK(ex.stats().rounds == 3);
  CHECK(ex.survivors().size() == first.size());
  CHECK(std::equal(
      first.begin(), first.end(), ex.survivors().begin(),
      [](const auto& a, const auto& b) { return a.index == b.index && a.value == b.value; }));
  CHECK(ex.stats().bytes_received == two_rounds_bytes);  // the same two histograms' bytes
  for (SparsePair& q : mine) q.value *= 8.0f;            // 3 exponents up: another coarse bin
  run(ex, mine);
  check_result(ex, mine, k);
  CHECK(ex.stats().rounds == 4);
  CHECK(ex.stats().bytes_received == two_rounds_bytes + 8 * sa::hist_bins);  // the missed one
  // Every entry survives (k above all pairs): no histogram of the picked bin is needed.
  SparseAllreduce all(MPI_COMM_WORLD, n, 400 * static_cast<std::uint64_t>(p) + 1);
  run(all, mine);
  check_result(all, mine, 400 * static_cast<std::uint64_t>(p) + 1);
  CHECK(all.stats().rounds == 3);
}

TEST_CASE("sparse allreduce: sums tied at the threshold, at most k + P - 1 survive") {
  // Every sum of the same magnitude (rank r's pairs at indices j P + r, or every rank's at
  // the same indices), or mostly zeros with k above the nonzero sums: one fine bin holds
  // them all, so without the cut every one of them survives (up to P k).
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 100000;
  const auto P = static_cast<std::uint32_t>(p);
  for (int kind = 0; kind < 3; ++kind) {
    const std::uint64_t k = kind == 2 ? 100 : 50;
    INFO("kind " << kind << ", ranks " << p);
    SparseAllreduce ex(MPI_COMM_WORLD, n, k);
    for (int it = 0; it < 2; ++it) {  // the second exchange's fine histogram comes seeded
      std::vector<SparsePair> mine;
      for (std::uint32_t j = 0; j < 300; ++j) {
        const std::uint32_t i = kind == 1 ? 7 * j : j * P + static_cast<std::uint32_t>(r);
        const float v = kind == 2 ? (j < 3 ? 2.0f + static_cast<float>(r) : 0.0f) : 0.75f;
        mine.push_back({i, j % 2 ? -v : v});
      }
      run(ex, mine);
      check_result(ex, mine, k);
      const std::size_t distinct = kind == 1 ? 300 : 300 * static_cast<std::size_t>(p);
      CHECK(ex.survivors().size() >= k);
      CHECK(ex.survivors().size() <= std::min<std::size_t>(distinct, k + P - 1));
      // Summed over ranks, the dropped pairs and the survivors are the pairs, exactly.
      CHECK(omgs_test::survivors_and_dropped_are_the_pairs(ex.survivors(), ex.dropped(), mine, n));
    }
  }
}

TEST_CASE("sparse allreduce: a hot region's P k pairs held in a window of O(k), any P") {
  // Every rank selects the same k indices, all in rank 0's region (a hot embedding row range
  // on every rank): rank 0 receives P k pairs, but holds at most its window (2 k pairs and
  // their sort keys) and the region's k sums before and after a fold, 48 k bytes, on 1, 2,
  // 3, 4 or 8 ranks alike; the sums stay the rank-order ones, bit for bit.
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 1 << 16;
  const std::uint64_t k = 256;
  SparseAllreduce ex(MPI_COMM_WORLD, n, k);
  const sa::IndexPermutation perm(n);
  auto mine =
      random_pairs(k, 0, static_cast<std::uint32_t>(ex.bounds()[1]), 3u + static_cast<unsigned>(r));
  for (std::size_t i = 0; i < mine.size(); ++i)  // k distinct permuted indices in region 0
    mine[i].index = static_cast<std::uint32_t>(perm.inverse(i * (ex.bounds()[1] / k)));
  for (int it = 0; it < 2; ++it) {
    run(ex, mine);
    check_result(ex, mine, k);
    if (r != 0) continue;
    CHECK(ex.stats().region_pairs == k * static_cast<std::uint64_t>(p));
    CHECK(ex.stats().region_bytes <= 48 * k);
    CHECK(ex.stats().batches == static_cast<std::uint32_t>((p + 1) / 2));  // 2 ranks' a batch
  }
}

TEST_CASE("sparse allreduce: a small window folds the regions' pairs in many batches, same bits") {
  const int r = world_rank();
  const std::uint32_t n = 100000;
  struct Window {  // the default again, whatever happens
    explicit Window(std::uint64_t w) { SparseAllreduce::set_window_pairs(w); }
    ~Window() { SparseAllreduce::set_window_pairs(0); }
  };
  for (std::uint64_t window : {1ull, 7ull, 100ull}) {
    INFO("window " << window);
    const Window small(window);
    SparseAllreduce ex(MPI_COMM_WORLD, n, 500);
    const auto mine = random_pairs(400, 0, n, 21u + static_cast<unsigned>(r));
    run(ex, mine);
    check_result(ex, mine, 500);  // the reference's sums, bit for bit
    // About 400 / P > 7 pairs from each rank: each rank's message in a batch of its own.
    if (window < 8) CHECK(ex.stats().batches == static_cast<std::uint32_t>(world_size()));
  }
  // The compact format's blocks too: the same survivors and dropped() as with the default
  // window, bit for bit.
  const auto mine = random_pairs(400, 0, n, 31u + static_cast<unsigned>(r));
  auto exchange = [&](std::uint64_t window) {
    const Window w(window);
    SparseAllreduce ex(MPI_COMM_WORLD, n, 500, omgs::PairWire::bf16);
    run(ex, mine);
    return std::make_pair(ex.survivors(), ex.dropped());
  };
  const auto whole = exchange(0), small = exchange(7);
  const auto same = [](const std::vector<SparsePair>& a, const std::vector<SparsePair>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
             return x.index == y.index && std::memcmp(&x.value, &y.value, sizeof(float)) == 0;
           });
  };
  CHECK(same(whole.first, small.first));
  CHECK(same(whole.second, small.second));
  CHECK(!whole.first.empty());
}

TEST_CASE("sparse allreduce: disagreement and bad input fail on every rank") {
  const int r = world_rank(), p = world_size();
  if (p > 1)
    CHECK_THROWS_WITH(SparseAllreduce(MPI_COMM_WORLD, r == 0 ? 100 : 101, 5),
                      Catch::Contains("the ranks disagree on the group (elements 100..101"));
  CHECK_THROWS_WITH(SparseAllreduce(MPI_COMM_WORLD, (1ull << 32) + 1, 5),
                    Catch::Contains("over 2^32"));
  SparseAllreduce ex(MPI_COMM_WORLD, 100, 5);
  std::vector<SparsePair> mine = {{1, 1.0f}};
  if (r == p - 1) mine.push_back({100, 1.0f});
  ex.start(mine.data(), mine.size());
  if (r == p - 1)
    CHECK_THROWS_WITH(ex.wait(60.0), Catch::Contains("pair 1 has index 100"));
  else
    CHECK_THROWS_WITH(ex.wait(60.0), Catch::Contains("rank " + std::to_string(p - 1) +
                                                     " passed a pair outside the group"));
  // Usable again afterwards.
  mine = {{static_cast<std::uint32_t>(r), 1.0f}};
  run(ex, mine);
  check_result(ex, mine, 5);
}

TEST_CASE("sparse allreduce: a rank that has not started bounds the others' wait") {
  const int r = world_rank(), p = world_size();
  if (p < 2) return;
  SparseAllreduce ex(MPI_COMM_WORLD, 1000, 10);
  const std::vector<SparsePair> mine = {{static_cast<std::uint32_t>(r), 1.0f}};
  if (r != p - 1) {
    ex.start(mine.data(), mine.size());
    CHECK_FALSE(ex.wait(0.2));  // rank p - 1 is late: bounded, and the phase says where
    CHECK(ex.phase() != SparseAllreduce::Phase::done);
    CHECK_THROWS_WITH(ex.start(mine.data(), mine.size()), Catch::Contains("in flight"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == p - 1) ex.start(mine.data(), mine.size());
  REQUIRE(ex.wait(60.0));
  check_result(ex, mine, 10);
}
