// The sparse allreduce (detail/sparse_allreduce.hpp) on skewed selections (zipf, clustered:
// tests/support/sparse_sources.hpp) and uniform ones, 1..8 ranks, 8-byte and compact pairs:
// the busiest region receives at most 1.5x the mean pairs (Stats::region_pairs, which sum
// to every rank's pairs), from the first exchange on; no mass is lost (survivors + every
// rank's dropped() = every rank's pairs, per index); every rank has the same survivors. The
// sources themselves, and the top-k selection from a dense (saved) gradient.
#include <omgs/detail/sparse_allreduce.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "omgs_catch.hpp"
#include "sparse_pairs_data.hpp"
#include "sparse_sources.hpp"

using omgs::PairWire;
using omgs::SparsePair;
using omgs::detail::SparseAllreduce;
using omgs_test::SparseSource;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::uint64_t sum_over_ranks(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

std::uint64_t max_over_ranks(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

/// The largest |every rank's pairs - survivors - every rank's dropped()| of an index, against
/// the magnitudes that met there (float sums of rounded values differ from the double sum by
/// rounding only).
double worst_lost_mass(const SparseAllreduce& ex, const std::vector<SparsePair>& mine) {
  std::map<std::uint32_t, double> rest, scale;
  for (const SparsePair& p : omgs_test::all_pairs(mine)) {
    rest[p.index] += p.value;
    scale[p.index] += std::fabs(p.value);
  }
  for (const SparsePair& p : ex.survivors()) rest[p.index] -= p.value;
  for (const SparsePair& p : omgs_test::all_pairs(ex.dropped())) rest[p.index] -= p.value;
  double worst = 0;
  for (const auto& [i, r] : rest) worst = std::max(worst, std::fabs(r) / (scale[i] + 1e-30));
  return worst;
}

}  // namespace

TEST_CASE("sparse allreduce on skewed gradients: regions balanced, mass conserved") {
  const int r = world_rank(), p = world_size();
  const std::uint64_t n = 1000000;
  const std::size_t k = 1000;  // density 0.001 per rank
  for (const SparseSource source :
       {SparseSource::uniform, SparseSource::zipf, SparseSource::clustered})
    for (const PairWire wire : {PairWire::pairs8, PairWire::bf16}) {
      SparseAllreduce ex(MPI_COMM_WORLD, n, k, wire);
      for (int it = 0; it < 3; ++it) {  // a new draw each, as iterations are
        INFO(omgs_test::to_string(source)
             << ", " << omgs::to_string(wire) << ", ranks " << p << ", iteration " << it);
        const auto mine = omgs_test::source_pairs(source, n, k, r, it);
        REQUIRE(mine.size() == k);
        ex.start(mine.data(), mine.size());
        REQUIRE(ex.wait(60.0));
        // Every rank's pairs reach exactly one region's owner.
        const std::uint64_t total = sum_over_ranks(ex.stats().region_pairs);
        CHECK(total == k * static_cast<std::uint64_t>(p));
        const double mean = static_cast<double>(total) / p;
        const double busiest = static_cast<double>(max_over_ranks(ex.stats().region_pairs));
        CHECK(busiest / mean <= 1.5);
        CHECK(ex.survivors().size() >= k);  // every source selects more than k distinct
        CHECK(std::is_sorted(ex.survivors().begin(), ex.survivors().end(),
                             [](const auto& a, const auto& b) { return a.index < b.index; }));
        CHECK(omgs_test::same_on_every_rank(ex.survivors()) == 1);
        // bf16 rounds each value and sum once, by 2^-9 relative at most.
        CHECK(worst_lost_mass(ex, mine) < (wire == PairWire::pairs8 ? 1e-5 : 1e-5 * p));
      }
    }
}

TEST_CASE("the synthetic sources: k distinct sorted pairs, skewed where they say") {
  const std::uint64_t n = 1000000;
  const std::size_t k = 1000;
  for (const SparseSource source :
       {SparseSource::uniform, SparseSource::zipf, SparseSource::clustered}) {
    INFO(omgs_test::to_string(source));
    CHECK(omgs_test::parse_sparse_source(omgs_test::to_string(source)) == source);
    const auto a = omgs_test::source_pairs(source, n, k, 0, 0);
    REQUIRE(a.size() == k);
    for (std::size_t i = 1; i < a.size(); ++i) REQUIRE(a[i - 1].index < a[i].index);
    CHECK(a.back().index < n);
    // Deterministic; another rank or iteration draws differently.
    CHECK(omgs_test::same_on_every_rank(a) == 1);
    const auto b = omgs_test::source_pairs(source, n, k, 1, 0);
    const auto c = omgs_test::source_pairs(source, n, k, 0, 1);
    CHECK_FALSE(std::equal(a.begin(), a.end(), b.begin(),
                           [](const auto& x, const auto& y) { return x.index == y.index; }));
    CHECK_FALSE(std::equal(a.begin(), a.end(), c.begin(),
                           [](const auto& x, const auto& y) { return x.index == y.index; }));
    // Skew: the share of pairs in the busiest 1/16 of the index range (uniform: ~1/16).
    std::vector<std::size_t> per(16, 0);
    for (const SparsePair& q : a) ++per[static_cast<std::size_t>(q.index * 16 / n)];
    const double top = static_cast<double>(*std::max_element(per.begin(), per.end())) / k;
    if (source == SparseSource::uniform) CHECK(top < 0.1);
    if (source != SparseSource::uniform) CHECK(top > 0.3);
  }
  CHECK_THROWS_WITH(omgs_test::parse_sparse_source("gauss"), Catch::Contains("unknown source"));
}

TEST_CASE("top_k_pairs selects a dense gradient's largest magnitudes, sorted by index") {
  const std::vector<float> g = {0.5f, -3.0f, 0.0f, 2.0f, -2.0f, 1.0f, 7.0f};
  const auto top = omgs_test::top_k_pairs(g.data(), g.size(), 4);
  std::vector<std::uint32_t> idx;
  for (const SparsePair& q : top) idx.push_back(q.index);
  CHECK(idx == std::vector<std::uint32_t>{1, 3, 4, 6});  // |2| twice: both kept
  CHECK(top[0].value == -3.0f);
  CHECK(omgs_test::top_k_pairs(g.data(), g.size(), 2).size() == 2);
  CHECK(omgs_test::top_k_pairs(g.data(), g.size(), 100).size() == g.size());
  CHECK(omgs_test::top_k_pairs(g.data(), g.size(), 0).empty());
}
