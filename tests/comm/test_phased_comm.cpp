// Many sparse-allreduce groups on one communicator (issue 48): the engine's phased wires share
// one communicator, each group on tags of its own, and their steps run in whatever order their
// messages arrive. Shown here with 24 exchanges started in a different order on every rank and
// advanced in a different order too, and with 24 sparse-allreduce groups interleaved with 8
// allgather groups in one engine (a progress thread, and inline): every result equals the same
// exchange run alone on a communicator of its own, and the survivors and every rank's dropped
// pairs hold all the mass. The histogram sums (TaggedSum) alone: back to back on one tag and two
// tags interleaved. Tags past MPI_TAG_UB are refused on every rank.
#include <omgs/detail/sparse_allreduce.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/error.hpp>

#include "comm/tagged_sum.hpp"
#include "mpi_world.hpp"
#include "omgs_catch.hpp"

using omgs::GroupBuffers;
using omgs::PairWire;
using omgs::SparsePair;
using omgs::detail::SparseAllreduce;
using omgs::detail::TaggedSum;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

constexpr int kGroups = 24;

/// `count` distinct indices below n, different per rank, group and iteration.
std::vector<SparsePair> pairs_of(int rank, int group, int iter, std::size_t n, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(rank * 7919 + group * 131 + iter * 31 + 1));
  std::normal_distribution<float> val(0.0f, 1.0f);
  std::uniform_int_distribution<std::size_t> idx(0, n - 1);
  std::vector<char> used(n, 0);
  std::vector<SparsePair> out;
  while (out.size() < count) {
    const std::size_t i = idx(gen);
    if (used[i]) continue;
    used[i] = 1;
    out.push_back({static_cast<std::uint32_t>(i), val(gen)});
  }
  return out;
}

std::size_t numel_of(int g) {
  return 300 + 977 * static_cast<std::size_t>(g % 7);
}
std::size_t k_of(int g) {
  return 5 + static_cast<std::size_t>(g % 5) * 7;
}
PairWire wire_of(int g) {
  return g % 4 == 3 ? PairWire::bf16 : PairWire::pairs8;
}

/// This rank's order of 0 .. count - 1: reversed on odd ranks, rotated by the rank.
std::vector<int> order_of(int rank, int count) {
  std::vector<int> o(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) o[static_cast<std::size_t>(i)] = (i + 3 * rank) % count;
  if (rank % 2 == 1) std::reverse(o.begin(), o.end());
  return o;
}

double sum_of(const SparsePair* p, std::size_t count) {
  double s = 0;
  for (std::size_t i = 0; i < count; ++i) s += p[i].value;
  return s;
}

/// The same exchange alone, on a communicator of its own: survivors and dropped equal.
void check_equal_to_alone(SparseAllreduce& alone, const std::vector<SparsePair>& mine,
                          const SparsePair* survivors, std::size_t survivor_count,
                          const SparsePair* dropped, std::size_t dropped_count) {
  alone.start(mine.data(), mine.size());
  REQUIRE(alone.wait(60.0));
  REQUIRE(survivor_count == alone.survivors().size());
  REQUIRE(dropped_count == alone.dropped().size());
  for (std::size_t i = 0; i < survivor_count; ++i) {
    REQUIRE(survivors[i].index == alone.survivors()[i].index);
    REQUIRE(survivors[i].value == alone.survivors()[i].value);
  }
  for (std::size_t i = 0; i < dropped_count; ++i) {
    REQUIRE(dropped[i].index == alone.dropped()[i].index);
    REQUIRE(dropped[i].value == alone.dropped()[i].value);
  }
  // No mass lost: the survivors (once) + every rank's dropped = every rank's pairs.
  double sums[2] = {sum_of(mine.data(), mine.size()), sum_of(dropped, dropped_count)};
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(std::abs(sum_of(survivors, survivor_count) + sums[1] - sums[0]) <
        1e-3 * (1 + std::abs(sums[0])));
}

}  // namespace

TEST_CASE("tagged sums: back to back on one tag, and two tags advanced in either order",
          "[comm][phased]") {
  const int P = world_size(), me = world_rank();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  TaggedSum a, b;
  for (int call = 0; call < 6; ++call) {
    // a: 5 summed values and a minimum; b: 3 summed values, on another tag, sized apart.
    std::vector<std::int64_t> x = {me, 1, call, me * me, 7, 100 - me};
    std::vector<std::int64_t> y = {2 * me + call, -1, 3};
    REQUIRE(a.start(comm, 5, x.data(), 6, 1) == MPI_SUCCESS);
    REQUIRE(b.start(comm, 6, y.data(), 3, 0) == MPI_SUCCESS);
    bool done_a = false, done_b = false;
    while (!done_a || !done_b) {
      if (me % 2 == 0) {  // ranks advance them in different orders
        REQUIRE(a.test(done_a) == MPI_SUCCESS);
        REQUIRE(b.test(done_b) == MPI_SUCCESS);
      } else {
        REQUIRE(b.test(done_b) == MPI_SUCCESS);
        REQUIRE(a.test(done_a) == MPI_SUCCESS);
      }
    }
    const std::int64_t ranks = P, sum_r = ranks * (ranks - 1) / 2;
    CHECK(x[0] == sum_r);
    CHECK(x[1] == ranks);
    CHECK(x[2] == call * ranks);
    CHECK(x[3] == (ranks - 1) * ranks * (2 * ranks - 1) / 6);
    CHECK(x[4] == 7 * ranks);
    CHECK(x[5] == 100 - (ranks - 1));  // the minimum
    CHECK(y[0] == 2 * sum_r + call * ranks);
    CHECK(y[1] == -ranks);
    CHECK(y[2] == 3 * ranks);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE("24 sparse allreduces on one communicator, started and advanced in any order",
          "[comm][phased]") {
  const int me = world_rank();
  MPI_Comm shared = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &shared);
  std::vector<std::unique_ptr<SparseAllreduce>> ex, alone;
  for (int g = 0; g < kGroups; ++g) {  // collective: in the same order on every rank
    ex.push_back(std::make_unique<SparseAllreduce>(
        SparseAllreduce::SharedComm{shared, g * SparseAllreduce::tags}, numel_of(g), k_of(g),
        wire_of(g)));
    alone.push_back(
        std::make_unique<SparseAllreduce>(MPI_COMM_WORLD, numel_of(g), k_of(g), wire_of(g)));
  }
  const std::vector<int> order = order_of(me, kGroups);
  for (int iter = 0; iter < 2; ++iter) {
    std::vector<std::vector<SparsePair>> mine(kGroups);
    for (const int g : order) {
      const auto G = static_cast<std::size_t>(g);
      mine[G] = pairs_of(me, g, iter, numel_of(g), (me + g + iter) % 5 == 0 ? 0 : k_of(g));
      ex[G]->start(mine[G].data(), mine[G].size());
    }
    for (int left = kGroups; left > 0;) {  // this rank's order, not the start order
      left = 0;
      for (auto it = order.rbegin(); it != order.rend(); ++it)
        if (!ex[static_cast<std::size_t>(*it)]->test()) ++left;
    }
    for (int g = 0; g < kGroups; ++g) {
      INFO("group " << g << ", iteration " << iter);
      const SparseAllreduce& e = *ex[static_cast<std::size_t>(g)];
      check_equal_to_alone(*alone[static_cast<std::size_t>(g)], mine[static_cast<std::size_t>(g)],
                           e.survivors().data(), e.survivors().size(), e.dropped().data(),
                           e.dropped().size());
    }
  }
  ex.clear();
  MPI_Comm_free(&shared);
}

TEST_CASE("24 sparse-allreduce groups among 8 allgather groups in one engine", "[comm][phased]") {
  const int P = world_size(), me = world_rank();
  const auto ranks = static_cast<std::size_t>(P);
  for (const bool inline_mode : {false, true}) {
    INFO("inline " << inline_mode);
    // Group g: an allgather of 4 pairs where g % 4 == 1, else a sparse allreduce.
    const int count = kGroups + kGroups / 3;
    std::vector<std::vector<SparsePair>> send(count), recv(count), dropped(count);
    std::vector<GroupBuffers> groups(static_cast<std::size_t>(count));
    std::vector<int> sa_index(static_cast<std::size_t>(count), -1);
    std::vector<std::unique_ptr<SparseAllreduce>> alone;
    for (int g = 0, s = 0; g < count; ++g) {
      const auto G = static_cast<std::size_t>(g);
      if (g % 4 == 1) {
        send[G].resize(4);
        recv[G].resize(4 * ranks);
        groups[G] = {send[G].data(), recv[G].data(), 4};
        continue;
      }
      sa_index[G] = s;
      send[G].resize(k_of(s));
      recv[G].resize(k_of(s) * ranks);
      dropped[G].resize(k_of(s) + recv[G].size());
      GroupBuffers b{send[G].data(), recv[G].data(), k_of(s)};
      b.kind = omgs::WireKind::sparse_allreduce;
      b.sparse_numel = numel_of(s);
      b.dropped = dropped[G].data();
      b.pair_wire = wire_of(s);
      groups[G] = b;
      alone.push_back(
          std::make_unique<SparseAllreduce>(MPI_COMM_WORLD, numel_of(s), k_of(s), wire_of(s)));
      ++s;
    }
    omgs::ProgressOptions o;
    o.read_environment = false;
    o.wait_timeout_s = 60;
    o.force_inline = inline_mode;
    o.variable_counts = true;
    omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
    for (int iter = 0; iter < 2; ++iter) {
      std::vector<std::vector<SparsePair>> mine(static_cast<std::size_t>(count));
      for (const int g : order_of(me, count)) {  // submitted in this rank's order
        const auto G = static_cast<std::size_t>(g);
        const int s = sa_index[G];
        if (s < 0) {
          for (std::size_t i = 0; i < 4; ++i)
            send[G][i] = {static_cast<std::uint32_t>(me * 4 + static_cast<int>(i)),
                          static_cast<float>(g + iter)};
          REQUIRE(e.submit(g, 4) == omgs::SubmitStatus::ok);
          continue;
        }
        const std::size_t c = (me + s + iter) % 5 == 0 ? 0 : k_of(s);
        mine[G] = pairs_of(me, s, iter, numel_of(s), c);
        std::copy(mine[G].begin(), mine[G].end(), send[G].begin());
        REQUIRE(e.submit(g, c) == omgs::SubmitStatus::ok);
      }
      REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
      for (int g = 0; g < count; ++g) {
        INFO("group " << g << ", iteration " << iter);
        const auto G = static_cast<std::size_t>(g);
        const int s = sa_index[G];
        if (s < 0) {
          REQUIRE(e.recv_total(g) == 4 * ranks);
          for (std::size_t i = 0; i < 4 * ranks; ++i) {
            CHECK(recv[G][i].index == i);
            CHECK(recv[G][i].value == static_cast<float>(g + iter));
          }
          continue;
        }
        check_equal_to_alone(*alone[static_cast<std::size_t>(s)], mine[G], recv[G].data(),
                             e.recv_total(g), dropped[G].data(), e.dropped_total(g));
      }
    }
  }
}

TEST_CASE("tags past MPI_TAG_UB are refused on every rank", "[comm][phased]") {
  void* attr = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag);
  REQUIRE(flag);
  const int top = *static_cast<int*>(attr);
  CHECK(top >= 32767);
  const int tags = SparseAllreduce::tags;
  CHECK_THROWS_WITH(
      SparseAllreduce(SparseAllreduce::SharedComm{MPI_COMM_WORLD, top - tags + 2}, 100, 5),
      Catch::Contains("MPI_TAG_UB = " + std::to_string(top)));
  CHECK_THROWS_WITH(SparseAllreduce(SparseAllreduce::SharedComm{MPI_COMM_WORLD, -1}, 100, 5),
                    Catch::Contains("outside the communicator's"));
  // The last tags the bound allows: usable.
  SparseAllreduce last(SparseAllreduce::SharedComm{MPI_COMM_WORLD, top - tags + 1}, 100, 5);
  std::vector<SparsePair> mine = {
      {static_cast<std::uint32_t>(world_rank()), 1.0f + static_cast<float>(world_rank())}};
  last.start(mine.data(), mine.size());
  REQUIRE(last.wait(60.0));
  CHECK(last.survivors().size() ==
        std::min<std::size_t>(5, static_cast<std::size_t>(world_size())));
}
