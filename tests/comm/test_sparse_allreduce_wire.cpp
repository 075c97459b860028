// The sparse allreduce (detail/sparse_allreduce.hpp) with every PairWire on 1..8 ranks: the
// compact pair format's blocks on the host equal omgs::encode_pairs' bytes; every rank ends
// with the same survivors, equal to a reference computed from every rank's pairs rounded to
// the wire's type, each survivor's sum rounded too; dropped() holds exactly what the
// rounding took away (the sender's and the region owner's) and the pairs that did not
// survive; no mass is lost over many iterations of error feedback; all pairs in a small
// index range, ranks without pairs, k = 0; the compact format sends fewer bytes per pair; the
// ranks disagreeing on the wire and a pair outside the group are errors on every rank.
#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <omgs/error.hpp>
#include <omgs/pair_format.hpp>

#include "comm/pair_codec.hpp"
#include "omgs_catch.hpp"
#include "sparse_pairs_data.hpp"

namespace sa = omgs::detail::sparse_allreduce;
using omgs::PairWire;
using omgs::SparsePair;
using omgs::detail::round_to_wire;
using omgs::detail::SparseAllreduce;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

constexpr PairWire all_wires[] = {PairWire::pairs8, PairWire::fp32, PairWire::bf16, PairWire::fp16};

/// The reference of one exchange of `mine` with `wire`, whose regions were `bounds`:
/// survivors (index -> value as sent) and this rank's dropped() (index -> value).
struct Reference {
  std::map<std::uint32_t, float> survivors, dropped;
};

Reference reference_of(const std::vector<SparsePair>& mine, PairWire wire,
                       const std::vector<SparsePair>& got,
                       const std::vector<std::uint64_t>& bounds) {
  std::vector<SparsePair> rounded = mine, sums;
  for (SparsePair& p : rounded) p.value = round_to_wire(wire, p.value);
  std::vector<SparsePair> all = omgs_test::all_pairs(rounded);
  sa::reduce_by_index(all, sums);  // rank order, as the region's owner adds them
  Reference ref;
  std::map<std::uint32_t, float> sum_of;
  for (const SparsePair& p : sums) sum_of[p.index] = p.value;
  for (const SparsePair& p : got)  // which survived is checked by test_sparse_allreduce.cpp
    if (sum_of.count(p.index)) ref.survivors[p.index] = round_to_wire(wire, sum_of[p.index]);
  const bool compact = wire != PairWire::pairs8;
  for (const SparsePair& p : mine) {
    const bool survived = ref.survivors.count(p.index) == 1;
    // The compact dropped() leaves out entries that would be 0 (a zero pair that did not
    // survive); pairs8's are the pairs whole.
    if (!survived && (!compact || p.value != 0.0f)) ref.dropped[p.index] = p.value;
    if (survived && compact && p.value != round_to_wire(wire, p.value))
      ref.dropped[p.index] = p.value - round_to_wire(wire, p.value);
  }
  const auto me = static_cast<std::size_t>(world_rank());
  const sa::IndexPermutation perm(bounds.back());  // the regions cut the permuted indices
  for (const auto& [i, sent] : ref.survivors) {
    const float sum = sum_of[i];
    const std::uint64_t j = perm.forward(i);
    if (!compact || j < bounds[me] || j >= bounds[me + 1] || sum == sent) continue;
    ref.dropped[i] += sum - sent;  // this rank owned the region: the sum's rounding error
    if (ref.dropped[i] == 0.0f) ref.dropped.erase(i);
  }
  return ref;
}

void check_against_reference(SparseAllreduce& ex, const std::vector<SparsePair>& mine,
                             PairWire wire) {
  const std::vector<std::uint64_t> bounds = ex.bounds();  // this exchange's regions
  ex.start(mine.data(), mine.size());
  REQUIRE(ex.wait(60.0));
  const Reference ref = reference_of(mine, wire, ex.survivors(), bounds);
  REQUIRE(ref.survivors.size() == ex.survivors().size());
  for (const SparsePair& p : ex.survivors()) CHECK(p.value == ref.survivors.at(p.index));
  CHECK(omgs_test::same_on_every_rank(ex.survivors()) == 1);
  std::map<std::uint32_t, float> dropped;
  for (const SparsePair& p : ex.dropped()) {
    CHECK(dropped.count(p.index) == 0);  // one entry per index
    dropped[p.index] = p.value;
  }
  CHECK(dropped == ref.dropped);
  if (wire != PairWire::pairs8)
    CHECK(std::is_sorted(ex.dropped().begin(), ex.dropped().end(),
                         [](const auto& a, const auto& b) { return a.index < b.index; }));
}

}  // namespace

TEST_CASE("the host blocks are omgs::encode_pairs' bytes and decode back") {
  using HostView = Kokkos::View<std::uint32_t*, Kokkos::HostSpace>;
  const Kokkos::DefaultHostExecutionSpace exec;
  const std::uint64_t base = 1000;
  for (const omgs::WireValues values :
       {omgs::WireValues::fp32, omgs::WireValues::bf16, omgs::WireValues::fp16})
    for (const std::size_t n : {std::size_t{1}, std::size_t{70000}, std::size_t{300000}})
      for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, n / 50, n}) {
        if (k > n) continue;
        INFO(omgs::to_string(values) << ", n " << n << ", k " << k);
        // Chunk edges and chunks that are entirely kept: every index when k == n.
        std::vector<SparsePair> pairs;
        if (k == n) {
          for (std::size_t i = 0; i < n; ++i)
            pairs.push_back({static_cast<std::uint32_t>(base + i), 0.37f * float(i) - 9.0f});
        } else {
          pairs = omgs_test::random_pairs(k, static_cast<std::uint32_t>(base),
                                          static_cast<std::uint32_t>(base + n), 5u);
          std::sort(pairs.begin(), pairs.end(),
                    [](const auto& a, const auto& b) { return a.index < b.index; });
        }
        const omgs::PairLayout l = omgs::make_pair_layout(n, k, values);
        CHECK(omgs::detail::block_words(n, k, values) == l.words);
        CHECK(l.words <= omgs::detail::blocks_words_bound(n, k, 1));
        Kokkos::View<std::uint32_t*, Kokkos::HostSpace> idx("idx", k);
        Kokkos::View<float*, Kokkos::HostSpace> val("val", k), none("none", 0);
        for (std::size_t i = 0; i < k; ++i) {
          idx(i) = static_cast<std::uint32_t>(pairs[i].index - base);
          val(i) = pairs[i].value;
        }
        HostView words("words", l.words);
        omgs::encode_pairs(exec, l, idx, val, none, words);
        exec.fence();
        std::vector<std::uint32_t> host(l.words + 1, 0xdeadbeefu);
        omgs::detail::encode_block(l, pairs.data(), base, host.data());
        CHECK(host[l.words] == 0xdeadbeefu);  // nothing past the block
        for (std::size_t w = 0; w < l.words; ++w) REQUIRE(host[w] == words(w));
        std::vector<SparsePair> back(k);
        omgs::detail::decode_block(l, host.data(), base, back.data());
        for (std::size_t i = 0; i < k; ++i) {
          REQUIRE(back[i].index == pairs[i].index);
          const PairWire w = values == omgs::WireValues::bf16   ? PairWire::bf16
                             : values == omgs::WireValues::fp16 ? PairWire::fp16
                                                                : PairWire::fp32;
          REQUIRE(back[i].value == round_to_wire(w, pairs[i].value));
        }
      }
}

TEST_CASE("the sparse allreduce with every pair wire equals the reference with its rounding") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 100000;
  for (const PairWire wire : all_wires)
    for (std::uint64_t k : {0ull, 1ull, 50ull, 500ull, 5000ull}) {
      INFO(omgs::to_string(wire) << ", k " << k << ", ranks " << p);
      SparseAllreduce ex(MPI_COMM_WORLD, n, k, wire);
      for (int it = 0; it < 3; ++it) {  // the same object again: nothing left over
        auto mine = omgs_test::random_pairs(400, 0, n, 1000u * it + static_cast<unsigned>(r));
        if (it == 1) mine[0].value = 3e38f;  // fp16 saturates: the rest stays back
        check_against_reference(ex, mine, wire);
      }
    }
}

TEST_CASE("the compact sparse allreduce: a small index range, ranks without pairs") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 1000000;
  for (const PairWire wire : all_wires) {
    INFO(omgs::to_string(wire) << ", ranks " << p);
    SparseAllreduce ex(MPI_COMM_WORLD, n, 64, wire);
    auto mine = omgs_test::random_pairs(100, 0, 300, 7u + static_cast<unsigned>(r));
    check_against_reference(ex, mine, wire);  // 300 indices: each region has a few
    if (r % 2 == 1) mine.clear();             // odd ranks send nothing
    check_against_reference(ex, mine, wire);
    mine = omgs_test::random_pairs(50, n - 1000, n, 11u + static_cast<unsigned>(r));
    check_against_reference(ex, mine, wire);           // the group's last indices
    SparseAllreduce none(MPI_COMM_WORLD, n, 0, wire);  // k = 0: nothing survives
    check_against_reference(none, mine, wire);
    CHECK(none.survivors().empty());
  }
}

TEST_CASE("the sparse allreduce conserves mass over iterations of error feedback, every wire") {
  const int r = world_rank(), p = world_size();
  const std::size_t n = 20000, k_local = 100;
  for (const PairWire wire : all_wires) {
    SparseAllreduce ex(MPI_COMM_WORLD, n, k_local, wire);
    std::vector<double> resid(n, 0.0), grad_sum(n, 0.0), applied(n, 0.0);
    std::mt19937 gen(42u + static_cast<unsigned>(r));
    std::normal_distribution<float> val(0.0f, 1.0f);
    for (int it = 0; it < 30; ++it) {
      std::vector<float> acc(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float g = val(gen) * (i < 2000 ? 3.0f : 1.0f);  // a hot range, as layers have
        grad_sum[i] += g;
        acc[i] = static_cast<float>(resid[i]) + g;
      }
      std::vector<std::uint32_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
      std::partial_sort(order.begin(), order.begin() + k_local, order.end(),
                        [&](auto a, auto b) { return std::fabs(acc[a]) > std::fabs(acc[b]); });
      std::vector<SparsePair> mine;
      for (std::size_t j = 0; j < k_local; ++j) mine.push_back({order[j], acc[order[j]]});
      for (std::size_t i = 0; i < n; ++i) resid[i] = acc[i];
      for (const SparsePair& s : mine) resid[s.index] = 0.0;  // sent
      ex.start(mine.data(), mine.size());
      REQUIRE(ex.wait(60.0));
      for (const SparsePair& d : ex.dropped()) resid[d.index] += d.value;  // taken back
      for (const SparsePair& s : ex.survivors()) applied[s.index] += s.value;
    }
    // Summed over ranks: every gradient = what was applied + what stays in the residuals.
    std::vector<double> total_grad(grad_sum), total_resid(resid);
    MPI_Allreduce(MPI_IN_PLACE, total_grad.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, total_resid.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    double worst = 0, mass = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(total_grad[i] - applied[i] - total_resid[i]));
      mass += std::fabs(total_grad[i]);
    }
    INFO(omgs::to_string(wire) << ", ranks " << p << ", mass " << mass);
    CHECK(worst < 1e-3);  // float sums of ~30 values of magnitude ~10
  }
}

TEST_CASE("sums tied at the threshold: at most k + P - 1 survive, mass exact, every wire") {
  // Every sum of one magnitude (1 + 2^-20: bf16 and fp16 round it, so the rounding errors
  // travel too), at disjoint indices or the same ones on every rank, or mostly zeros with k
  // above the nonzero sums: without the cut every tie survives (up to P k).
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 100000;
  const auto P = static_cast<std::uint32_t>(p);
  const float v = 1.0f + std::ldexp(1.0f, -20);
  for (const PairWire wire : all_wires)
    for (int kind = 0; kind < 3; ++kind) {
      const std::uint64_t k = kind == 2 ? 100 : 50;
      INFO(omgs::to_string(wire) << ", kind " << kind << ", ranks " << p);
      SparseAllreduce ex(MPI_COMM_WORLD, n, k, wire);
      for (int it = 0; it < 2; ++it) {
        std::vector<SparsePair> mine;
        for (std::uint32_t j = 0; j < 300; ++j) {
          const std::uint32_t i = kind == 1 ? 7 * j : j * P + static_cast<std::uint32_t>(r);
          const float x = kind == 2 ? (j < 3 ? v + static_cast<float>(r) : 0.0f) : v;
          mine.push_back({i, j % 2 ? -x : x});
        }
        check_against_reference(ex, mine, wire);
        const std::size_t distinct = kind == 1 ? 300 : 300 * static_cast<std::size_t>(p);
        CHECK(ex.survivors().size() >= k);
        CHECK(ex.survivors().size() <= std::min<std::size_t>(distinct, k + P - 1));
        CHECK(ex.survivors().size() <= sa::max_survivors(n, k, P));
        // Summed over ranks, the dropped pairs and the survivors are the pairs, exactly.
        CHECK(
            omgs_test::survivors_and_dropped_are_the_pairs(ex.survivors(), ex.dropped(), mine, n));
      }
    }
}

TEST_CASE("the compact sparse allreduce sends fewer bytes per pair") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 1000000;
  const std::size_t k = 1000;  // density 0.001 per rank
  for (const PairWire wire : all_wires) {
    SparseAllreduce ex(MPI_COMM_WORLD, n, k, wire);
    const auto mine = omgs_test::random_pairs(k, 0, n, 3u + static_cast<unsigned>(r));
    ex.start(mine.data(), mine.size());
    REQUIRE(ex.wait(60.0));
    const auto& st = ex.stats();
    REQUIRE(st.pairs_sent > 0);  // the survivors of this rank's region at least
    const double per_pair = double(st.pair_bytes_sent) / double(st.pairs_sent);
    INFO(omgs::to_string(wire) << ", ranks " << p << ": " << per_pair << " bytes per pair");
    CHECK(st.bytes_sent >= st.pair_bytes_sent);
    if (wire == PairWire::pairs8) CHECK(per_pair == 8.0);
    if (wire == PairWire::fp32) CHECK(per_pair < 6.5);
    if (wire == PairWire::bf16 || wire == PairWire::fp16) CHECK(per_pair < 4.5);
  }
}

TEST_CASE("a pair outside the group fails every rank with every wire, then works again") {
  const int r = world_rank(), p = world_size();
  const std::uint32_t n = 1000;
  for (const PairWire wire : all_wires) {
    INFO(omgs::to_string(wire) << ", ranks " << p);
    SparseAllreduce ex(MPI_COMM_WORLD, n, 5, wire);
    // Every rank sends pairs to every region; the last rank's input is bad.
    auto mine = omgs_test::random_pairs(200, 0, n, 9u + static_cast<unsigned>(r));
    if (r == p - 1) mine.push_back({n + 3, 1.0f});
    ex.start(mine.data(), mine.size());
    if (r == p - 1)
      CHECK_THROWS_WITH(ex.wait(60.0), Catch::Contains("has index 1003"));
    else
      CHECK_THROWS_WITH(ex.wait(60.0), Catch::Contains("rank " + std::to_string(p - 1) +
                                                       " passed a pair outside the group"));
    if (r == p - 1) mine.pop_back();
    check_against_reference(ex, mine, wire);  // nothing of the failed exchange is left over
  }
}

TEST_CASE("the ranks disagreeing on the sparse allreduce's pair wire fail on every rank") {
  const int r = world_rank(), p = world_size();
  if (p > 1)
    CHECK_THROWS_WITH(
        SparseAllreduce(MPI_COMM_WORLD, 100, 5, r == 0 ? PairWire::pairs8 : PairWire::bf16),
        Catch::Contains("the ranks disagree on pair_wire (pairs8 and bf16)"));
  CHECK_THROWS_WITH(SparseAllreduce(MPI_COMM_WORLD, 1ull << 32, 5, PairWire::fp16),
                    Catch::Contains("over 2^32 - 1, the compact pair format's limit"));
  CHECK_THROWS_WITH(SparseAllreduce(MPI_COMM_WORLD, 100, 5, static_cast<PairWire>(9)),
                    Catch::Contains("pair_wire has an unknown value (9)"));
}
