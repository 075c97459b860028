// ProgressEngine::rebind: the engine takes a new set of groups while idle and posts them
// as a new engine would (every pair intact, statistics restarted), keeping its thread and
// communicators; a refusal on any rank (busy, groups that differ) throws on every rank and
// the previous groups keep working.
#include <mpi.h>

#include <string>
#include <vector>

#include <omgs/comm.hpp>

#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

using namespace omgs_test_comm;

namespace {

/// `iterations` exchanges of every group of `b`; the number of wrong pairs.
long run_fixed(ProgressEngine& e, Buffers& b, const std::vector<std::size_t>& ks, int first_iter,
               int iterations) {
  long bad = 0;
  const int G = static_cast<int>(ks.size());
  for (int iter = first_iter; iter < first_iter + iterations; ++iter) {
    for (int g = 0; g < G; ++g) fill(b, g, iter, ks[static_cast<std::size_t>(g)]);
    for (int j = 0; j < G; ++j) {
      const int g = (world_rank() + iter) % 2 ? G - 1 - j : j;  // any order: posted in plan order
      REQUIRE(e.submit(g) == SubmitStatus::ok);
    }
    for (int g = 0; g < G; ++g) {
      REQUIRE(e.wait(g) == WaitStatus::ok);
      bad += check(b, e, g, iter, fixed_counts(ks[static_cast<std::size_t>(g)]));
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("rebind: the engine posts the new groups intact and keeps its thread", "[comm][rebind]") {
  const bool inline_mode = GENERATE(false, true);
  CAPTURE(inline_mode);
  const std::vector<std::size_t> ks_b = {5, 0, 2000, 7};
  Buffers a(kKs, world_size()), b(ks_b, world_size());
  ProgressOptions o = quiet_options();
  o.force_inline = inline_mode;
  ProgressEngine e(MPI_COMM_WORLD, a.groups, o);
  const omgs::ProgressStats first = e.stats();
  CHECK(first.group_sets == 1);
  CHECK(run_fixed(e, a, kKs, 0, 3) == 0);
  e.rebind(b.groups);
  CHECK(e.num_groups() == static_cast<int>(ks_b.size()));
  CHECK(e.stats().groups[0].last_submit_s == 0.0);  // seconds since the rebind, as new
  CHECK(run_fixed(e, b, ks_b, 3, 4) == 0);
  const omgs::ProgressStats after = e.stats();
  CHECK(after.group_sets == 2);
  CHECK(after.mode == first.mode);
  CHECK(after.pinned_pu == first.pinned_pu);
  // Counted from the rebind, as by a new engine: 4 exchanges of each new group.
  CHECK(after.collectives_posted == 4 * ks_b.size());
  CHECK(after.groups_completed == 4 * ks_b.size());
  CHECK(after.groups.size() == ks_b.size());
  CHECK(after.groups[2].completions == 4);
  e.rebind(a.groups);  // and back
  CHECK(run_fixed(e, a, kKs, 7, 2) == 0);
  CHECK(e.stats().group_sets == 3);
}

TEST_CASE("rebind: dense and sparse groups, variable counts", "[comm][rebind]") {
  const int P = world_size();
  std::vector<float> dsend(300, 1.0f), drecv(300, 0.0f);
  Buffers sparse({4, 1, 9}, P);  // group 1 dense instead
  std::vector<omgs::GroupBuffers> groups = sparse.groups;
  groups[1] = {};
  groups[1].kind = omgs::WireKind::allreduce_sum;
  groups[1].dense_send = dsend.data();
  groups[1].dense_recv = drecv.data();
  groups[1].dense_numel = dsend.size();
  ProgressOptions o = quiet_options();
  o.variable_counts = true;
  Buffers first({6}, P);
  ProgressEngine e(MPI_COMM_WORLD, first.groups, o);
  e.rebind(groups);
  for (int iter = 0; iter < 3; ++iter) {
    fill(sparse, 0, iter, 2);
    fill(sparse, 2, iter, 9);
    REQUIRE(e.submit(2, 9) == SubmitStatus::ok);
    REQUIRE(e.submit(1, 0) == SubmitStatus::ok);
    REQUIRE(e.submit(0, 2) == SubmitStatus::ok);
    REQUIRE(e.wait_all() == WaitStatus::ok);
    CHECK(check(sparse, e, 0, iter, fixed_counts(2)) == 0);
    CHECK(check(sparse, e, 2, iter, fixed_counts(9)) == 0);
    for (float x : drecv) REQUIRE(x == static_cast<float>(P));
  }
}

TEST_CASE("rebind: a refusal on any rank throws on every rank and keeps the groups",
          "[comm][rebind]") {
  Buffers a(kKs, world_size());
  ProgressEngine e(MPI_COMM_WORLD, a.groups, quiet_options());
  CHECK(run_fixed(e, a, kKs, 0, 1) == 0);
  if (world_size() > 1) {  // groups that differ across ranks
    const std::vector<std::size_t> mine =
        world_rank() == 1 ? std::vector<std::size_t>{4, 4} : std::vector<std::size_t>{4};
    Buffers other(mine, world_size());
    CHECK_THROWS_WITH(e.rebind(other.groups),
                      Catch::Contains("rebind") && Catch::Contains("number of groups"));
    CHECK(e.stats().group_sets == 1);
    CHECK(run_fixed(e, a, kKs, 1, 1) == 0);
  }
  // Rank 0 has group 0 submitted and not waited for: every rank refuses, rank 0 says why.
  fill(a, 0, 2, kKs[0]);
  if (world_rank() == 0) REQUIRE(e.submit(0) == SubmitStatus::ok);
  Buffers b({3}, world_size());
  if (world_rank() == 0) {
    CHECK_THROWS_WITH(e.rebind(b.groups), Catch::Contains("group 0 is submitted"));
  } else {
    CHECK_THROWS_WITH(e.rebind(b.groups),
                      Catch::Contains("rebind") && Catch::Contains("another rank rejected"));
  }
  if (world_rank() != 0) REQUIRE(e.submit(0) == SubmitStatus::ok);
  REQUIRE(e.wait(0) == WaitStatus::ok);
  CHECK(check(a, e, 0, 2, fixed_counts(kKs[0])) == 0);
  CHECK(run_fixed(e, a, kKs, 3, 1) == 0);
  // The engine was left as it was: a later rebind works.
  e.rebind(b.groups);
  CHECK(run_fixed(e, b, {3}, 4, 2) == 0);
  CHECK(e.stats().group_sets == 2);
}
