// The progress engine with dense groups (one MPI_Iallreduce each) between sparse ones (one
// MPI_Iallgatherv each), fixed and variable counts: every rank posts both kinds in plan
// order whatever order they are submitted in, so nothing deadlocks, and the sums and pairs
// arrive intact, with the caller's buffers or staged through host mirrors.
#include <mpi.h>

#include <vector>

#include <omgs/comm.hpp>

#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

TEST_CASE("dense and sparse groups alternate in plan order, fixed and variable counts",
          "[comm][dense]") {
  const int P = omgs_test::world_size(), me = omgs_test::world_rank();
  // Even groups dense (n floats), odd groups sparse (k pairs).
  const std::vector<std::size_t> sizes = {1000, 3, 50000, 17, 1, 0, 4096, 5};
  const int G = int(sizes.size());
  const bool variable = GENERATE(false, true);
  // staged: both kinds through their host mirrors (stage_through_host).
  const bool staged = GENERATE(false, true);
  CAPTURE(variable, staged);
  {
    std::vector<std::vector<float>> dsend(G), drecv(G);
    std::vector<std::vector<omgs::SparsePair>> psend(G), precv(G);
    std::vector<omgs::GroupBuffers> groups(G);
    for (int g = 0; g < G; ++g) {
      const std::size_t n = sizes[std::size_t(g)];
      if (g % 2 == 0) {
        dsend[g].assign(n, 0.0f);
        drecv[g].assign(n, 0.0f);
        groups[g].kind = omgs::WireKind::allreduce_sum;
        groups[g].dense_send = dsend[g].data();
        groups[g].dense_recv = drecv[g].data();
        groups[g].dense_numel = n;
      } else {
        psend[g].resize(n);
        precv[g].resize(n * std::size_t(P));
        groups[g] = {psend[g].data(), precv[g].data(), n};
      }
    }
    omgs::ProgressOptions o;
    o.read_environment = false;
    o.wait_timeout_s = 60;
    o.variable_counts = variable;
    omgs_test_comm::CopyCounts copies;
    if (staged) omgs_test_comm::stage_through_host(o, copies);
    omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
    CHECK(e.stats().staging == staged);
    long bad = 0;
    for (int iter = 0; iter < 20; ++iter) {
      for (int g = 0; g < G; ++g) {
        for (std::size_t i = 0; i < dsend[g].size(); ++i)
          dsend[g][i] = omgs_test_comm::exact_dense_value(me, g, iter, i);
        for (std::size_t i = 0; i < psend[g].size(); ++i)
          psend[g][i] = {std::uint32_t(me * 100000 + g * 1000 + int(i)), float(iter)};
      }
      // Submission order differs per rank and iteration; posting follows plan order.
      for (int j = 0; j < G; ++j) {
        const int g = (me + iter) % 2 ? G - 1 - j : j;
        const std::size_t count = g % 2 ? sizes[std::size_t(g)] : 0;
        REQUIRE((variable ? e.submit(g, count) : e.submit(g)) == omgs::SubmitStatus::ok);
      }
      for (int g = 0; g < G; ++g) {
        REQUIRE(e.wait(g) == omgs::WaitStatus::ok);
        for (std::size_t i = 0; i < drecv[g].size(); ++i) {
          float sum = 0.0f;
          for (int r = 0; r < P; ++r) sum += omgs_test_comm::exact_dense_value(r, g, iter, i);
          bad += drecv[g][i] != sum;  // small integers and halves: exact in any order
        }
        for (std::size_t i = 0; i < precv[g].size(); ++i) {
          const std::size_t k = sizes[std::size_t(g)];
          const int r = int(i / k);
          bad += precv[g][i].index != std::uint32_t(r * 100000 + g * 1000 + int(i % k)) ||
                 precv[g][i].value != float(iter);
        }
      }
    }
    CHECK(bad == 0);
    const omgs::ProgressStats s = e.stats();
    CHECK(s.groups_completed == std::uint64_t(20 * G));
    // One collective per group exchange (allreduce or allgatherv), plus in variable-count
    // mode the count allgather of each sparse (odd) group; dense groups exchange no counts.
    CHECK(s.collectives_posted == std::uint64_t(20 * (G + (variable ? G / 2 : 0))));
    CHECK(s.groups[0].bytes_sent == 20u * 1000u * sizeof(float));
    // Each way, per iteration: the 4 dense groups, and the sparse groups but the one of k = 0.
    CHECK(copies.to_host == (staged ? 20 * 7 : 0));
    CHECK(copies.to_device == (staged ? 20 * 7 : 0));
  }
}

TEST_CASE("dense group set-up errors on every rank", "[comm][dense]") {
  std::vector<float> x(10);
  omgs::GroupBuffers bad;
  bad.kind = omgs::WireKind::allreduce_sum;
  bad.dense_numel = 10;  // null buffers
  omgs::ProgressOptions o;
  o.read_environment = false;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {bad}, o),
                    Catch::Contains("a dense group needs k = 0 and non-null"));
  // A group dense on one rank and sparse on another is refused, not posted.
  omgs::SparsePair pairs[40];
  omgs::GroupBuffers g;
  if (omgs_test::world_rank() == 0) {
    g.kind = omgs::WireKind::allreduce_sum;
    g.dense_send = x.data();
    g.dense_recv = x.data();
    g.dense_numel = 10;
  } else {
    g = {pairs, pairs + 4, 4};
  }
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {g}, o), Catch::Contains("disagree"));
}
