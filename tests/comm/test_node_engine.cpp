// The two-level dense wire (WireKind::allreduce_node) in the progress engine: nodes made by
// ProgressOptions::ranks_per_node (and OMGS_RANKS_PER_NODE) on 1 to 8 ranks in 1 to 4 nodes,
// groups of sizes G does not divide, between flat dense and sparse groups, submitted in any
// order, with the caller's buffers or staged: every rank gets the exact sum. Bad shapes and a
// group two-level on one rank and flat on another are refused on every rank.
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include <omgs/comm.hpp>

#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

namespace {
omgs::GroupBuffers dense(omgs::WireKind kind, std::vector<float>& send, std::vector<float>& recv) {
  omgs::GroupBuffers b;
  b.kind = kind;
  b.dense_send = send.data();
  b.dense_recv = recv.data();
  b.dense_numel = send.size();
  return b;
}
}  // namespace

TEST_CASE("two-level groups sum exactly on every node shape", "[comm][node]") {
  const int P = omgs_test::world_size(), me = omgs_test::world_rank();
  const int rpn = GENERATE(0, 1, 2, 4);  // 0: found by shared memory (one node here)
  if (rpn > P || (rpn > 0 && P % rpn != 0)) return;
  const bool staged = GENERATE(false, true);
  CAPTURE(P, rpn, staged);
  // Two-level groups 0, 2, 4 (sizes 1001 and 3 not divisible by 2 or 4, 1 below G), a flat
  // dense group 1 and a sparse group 3 between them.
  const std::vector<std::size_t> sizes = {1001, 500, 3, 4, 1};
  const int G = int(sizes.size());
  std::vector<std::vector<float>> send(G), recv(G);
  std::vector<std::vector<omgs::SparsePair>> psend(G), precv(G);
  std::vector<omgs::GroupBuffers> groups(G);
  for (int g = 0; g < G; ++g) {
    const std::size_t n = sizes[std::size_t(g)];
    send[g].assign(n, 0.0f);
    recv[g].assign(n, 0.0f);
    if (g == 3) {
      send[g].clear();
      recv[g].clear();
      psend[g].resize(n);
      precv[g].resize(n * std::size_t(P));
      groups[g] = {psend[g].data(), precv[g].data(), n};
    } else {
      groups[g] = dense(g == 1 ? omgs::WireKind::allreduce_sum : omgs::WireKind::allreduce_node,
                        send[g], recv[g]);
    }
  }
  omgs::ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.ranks_per_node = rpn;
  omgs_test_comm::CopyCounts copies;
  if (staged) omgs_test_comm::stage_through_host(o, copies);
  omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
  const omgs::ProgressStats st = e.stats();
  if (rpn > 0) {
    CHECK(st.ranks_per_node == rpn);
    CHECK(st.nodes == P / rpn);
  }
  CHECK(st.ranks_per_node * st.nodes == P);
  CHECK(st.nodes_equal);
  long bad = 0;
  for (int iter = 0; iter < 6; ++iter) {
    for (int g = 0; g < G; ++g) {
      for (std::size_t i = 0; i < send[g].size(); ++i)
        send[g][i] = omgs_test_comm::exact_dense_value(me, g, iter, i);
      for (std::size_t i = 0; i < psend[g].size(); ++i)
        psend[g][i] = {std::uint32_t(me * 1000 + int(i)), float(iter)};
    }
    for (int j = 0; j < G; ++j) {  // submission order differs per rank and iteration
      const int g = (me + iter) % 2 ? G - 1 - j : j;
      REQUIRE(e.submit(g) == omgs::SubmitStatus::ok);
    }
    for (int g = 0; g < G; ++g) {
      REQUIRE(e.wait(g) == omgs::WaitStatus::ok);
      for (std::size_t i = 0; i < recv[g].size(); ++i) {
        float sum = 0.0f;
        for (int r = 0; r < P; ++r) sum += omgs_test_comm::exact_dense_value(r, g, iter, i);
        bad += recv[g][i] != sum;  // small integers and quarters: exact in any order
      }
      for (std::size_t i = 0; i < precv[g].size(); ++i)
        bad += precv[g][i].index != std::uint32_t(int(i / 4) * 1000 + int(i % 4));
    }
  }
  CHECK(bad == 0);
  CHECK(e.stats().groups_completed == std::uint64_t(6 * G));
  CHECK(e.stats().groups[0].bytes_sent == 6u * 1001u * sizeof(float));
}

TEST_CASE("OMGS_RANKS_PER_NODE sets the node shape; bad shapes fail on every rank",
          "[comm][node]") {
  const int P = omgs_test::world_size(), me = omgs_test::world_rank();
  std::vector<float> s(10, 1.0f), r(10, 0.0f);
  const omgs::GroupBuffers g = dense(omgs::WireKind::allreduce_node, s, r);
  omgs::ProgressOptions o;
  o.wait_timeout_s = 60;
  if (P % 2 == 0) {
    setenv("OMGS_RANKS_PER_NODE", "2", 1);
    omgs::ProgressEngine e(MPI_COMM_WORLD, {g}, o);
    CHECK(e.stats().ranks_per_node == 2);
    CHECK(e.stats().nodes == P / 2);
    unsetenv("OMGS_RANKS_PER_NODE");
  }
  setenv("OMGS_RANKS_PER_NODE", "two", 1);
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o),
                    Catch::Contains("OMGS_RANKS_PER_NODE"));
  unsetenv("OMGS_RANKS_PER_NODE");
  o.read_environment = false;
  o.ranks_per_node = P + 1;  // never divides P
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o),
                    Catch::Contains("does not divide the " + std::to_string(P) + " ranks"));
  o.ranks_per_node = -1;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o), Catch::Contains("negative"));
  if (P > 1) {
    o.ranks_per_node = me == 0 ? 1 : P;
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o),
                      Catch::Contains("ranks disagree on ranks_per_node"));
  }
}

TEST_CASE("two-level group set-up errors on every rank", "[comm][node]") {
  std::vector<float> x(10);
  omgs::ProgressOptions o;
  o.read_environment = false;
  omgs::GroupBuffers bad;
  bad.kind = omgs::WireKind::allreduce_node;
  bad.dense_numel = 10;  // null buffers
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {bad}, o),
                    Catch::Contains("a two-level dense group needs k = 0 and non-null"));
  omgs::GroupBuffers blocking = dense(omgs::WireKind::allreduce_node, x, x);
  blocking.blocking_allreduce = true;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {blocking}, o),
                    Catch::Contains("blocking_allreduce is set"));
  // Two-level on one rank, flat on the others: refused, never posted.
  if (omgs_test::world_size() > 1) {
    const omgs::GroupBuffers g = dense(omgs_test::world_rank() == 0 ? omgs::WireKind::allreduce_node
                                                                    : omgs::WireKind::allreduce_sum,
                                       x, x);
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o), Catch::Contains("disagree"));
  }
}
