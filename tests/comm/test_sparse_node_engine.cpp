// The sparse node-summed wire (WireKind::sparse_node) in the progress engine, on 1 to 8 ranks
// in 1 to 4 nodes (ProgressOptions::ranks_per_node G = 1, 2, 4): groups of 1001, 3 and 1
// elements (G not dividing them, n < G), shared as pairs or as floats inside the node, beside
// a two-level dense group on the same node communicators, submitted in any order, with the
// caller's buffers or staged. Each exchange is compared with a reference computed here from
// every rank's values (small integers: every sum exact in any order): the node's sum, the
// top-k of each shard (ties to the lower index), their sum over the nodes on every rank, and
// what each rank keeps. A NaN on one rank fails the group on every rank and leaves every
// node_residual as it was. Bad buffers and a group node-summed on one rank only are refused.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <omgs/comm.hpp>

#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

namespace {

float value(int rank, int g, int iter, std::size_t i) {
  return float(
      int((std::size_t(rank) * 31 + i * 17 + std::size_t(g) * 7 + std::size_t(iter) * 13) % 23) -
      11);
}

/// The shards of n elements over G local ranks, and each one's k (GroupBuffers::node_residual).
struct Shards {
  std::vector<std::size_t> begin, size, k;
  Shards(std::size_t n, std::size_t k_total, int G) {
    for (int i = 0; i < G; ++i) {
      const std::size_t s = n / std::size_t(G) + (std::size_t(i) < n % std::size_t(G) ? 1 : 0);
      begin.push_back(i == 0 ? 0 : begin.back() + size.back());
      size.push_back(s);
      k.push_back(s == 0 ? 0 : std::min(s, std::max<std::size_t>(1, (k_total * s + n - 1) / n)));
    }
  }
};

/// The expected sum on every rank (`sum`) and what rank `me` keeps (`keep`), from every
/// rank's values: each node's sum, each shard's top-k by |value| (ties to the lower index).
void reference(int g, int iter, std::size_t n, std::size_t k, int P, int G, int me,
               std::vector<float>& sum, std::vector<float>& keep) {
  const Shards sh(n, k, G);
  sum.assign(n, 0.0f);
  keep.assign(n, 0.0f);
  for (int node = 0; node < P / G; ++node) {
    std::vector<float> s(n, 0.0f);
    for (int r = node * G; r < (node + 1) * G; ++r)
      for (std::size_t i = 0; i < n; ++i) s[i] += value(r, g, iter, i);
    for (int l = 0; l < G; ++l) {
      std::vector<std::size_t> idx(sh.size[std::size_t(l)]);
      std::iota(idx.begin(), idx.end(), sh.begin[std::size_t(l)]);
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        return std::fabs(s[a]) > std::fabs(s[b]);
      });
      const bool mine = node * G + l == me;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        if (j < sh.k[std::size_t(l)])
          sum[idx[j]] += s[idx[j]];
        else if (mine)
          keep[idx[j]] = s[idx[j]];
      }
    }
  }
}

struct Group {
  std::size_t n, k;
  omgs::WireKind kind;
  std::vector<float> send, recv, keep;
  omgs::GroupBuffers buffers() {
    send.assign(n, 0.0f);
    recv.assign(n, 0.0f);
    keep.assign(n, 0.0f);
    omgs::GroupBuffers b;
    b.kind = kind;
    b.dense_send = send.data();
    b.dense_recv = recv.data();
    b.dense_numel = n;
    if (kind == omgs::WireKind::sparse_node) {
      b.k = k;
      b.node_residual = keep.data();
    }
    return b;
  }
};

}  // namespace

TEST_CASE("sparse node-summed groups match the reference on every node shape",
          "[comm][sparse_node]") {
  const int P = omgs_test::world_size(), me = omgs_test::world_rank();
  const int G = GENERATE(1, 2, 4);
  if (G > P || P % G != 0) return;
  const bool staged = GENERATE(false, true);
  CAPTURE(P, G, staged);
  // 1001 at k = 50 (shared as pairs), a two-level dense group, 3 and 1 (n <= G), 1001 at
  // k = 600 (shared as floats).
  std::vector<Group> groups = {{1001, 50, omgs::WireKind::sparse_node, {}, {}, {}},
                               {500, 0, omgs::WireKind::allreduce_node, {}, {}, {}},
                               {3, 1, omgs::WireKind::sparse_node, {}, {}, {}},
                               {1, 1, omgs::WireKind::sparse_node, {}, {}, {}},
                               {1001, 600, omgs::WireKind::sparse_node, {}, {}, {}}};
  const int NG = int(groups.size());
  std::vector<omgs::GroupBuffers> buffers;
  for (Group& gr : groups) buffers.push_back(gr.buffers());
  omgs::ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.ranks_per_node = G;
  omgs_test_comm::CopyCounts copies;
  if (staged) omgs_test_comm::stage_through_host(o, copies);
  omgs::ProgressEngine e(MPI_COMM_WORLD, buffers, o);
  REQUIRE(e.stats().nodes == P / G);
  long bad = 0;
  const int poisoned_iter = 3;
  for (int iter = 0; iter < 6; ++iter) {
    for (int g = 0; g < NG; ++g) {
      Group& gr = groups[std::size_t(g)];
      for (std::size_t i = 0; i < gr.n; ++i) gr.send[i] = value(me, g, iter, i);
      std::fill(gr.keep.begin(), gr.keep.end(), 7.0f);  // to see whether it was written
    }
    const bool poison = iter == poisoned_iter && me == P - 1;
    if (poison) groups[0].send[5] = std::nanf("");
    for (int j = 0; j < NG; ++j) {  // submission order differs per rank and iteration
      const int g = (me + iter) % 2 ? NG - 1 - j : j;
      REQUIRE(e.submit(g) == omgs::SubmitStatus::ok);
    }
    for (int g = 0; g < NG; ++g) {
      REQUIRE(e.wait(g) == omgs::WaitStatus::ok);
      Group& gr = groups[std::size_t(g)];
      if (gr.kind != omgs::WireKind::sparse_node) continue;
      if (g == 0 && iter == poisoned_iter) {  // failed on every rank: nothing kept
        bad +=
            std::all_of(gr.recv.begin(), gr.recv.end(), [](float v) { return std::isfinite(v); });
        bad += std::count_if(gr.keep.begin(), gr.keep.end(), [](float v) { return v != 7.0f; });
        continue;
      }
      std::vector<float> sum, keep;
      reference(g, iter, gr.n, gr.k, P, G, me, sum, keep);
      for (std::size_t i = 0; i < gr.n; ++i) bad += gr.recv[i] != sum[i] || gr.keep[i] != keep[i];
    }
  }
  CHECK(bad == 0);
  CHECK(e.stats().groups_completed == std::uint64_t(6 * NG));
  if (staged) CHECK(copies.to_device > 0);
  // Bytes: one exchange's, each way; nothing crosses the node's ranks when G = P = 1.
  const omgs::GroupStats gs = e.stats().groups[0];
  CHECK(gs.bytes_sent % 6 == 0);
  CHECK((gs.bytes_sent > 0) == (P > 1));
  CHECK((gs.bytes_received > 0) == (P > 1));
}

TEST_CASE("sparse node-summed set-up errors on every rank", "[comm][sparse_node]") {
  std::vector<float> x(10), y(10), z(10);
  omgs::ProgressOptions o;
  o.read_environment = false;
  omgs::GroupBuffers b;
  b.kind = omgs::WireKind::sparse_node;
  b.dense_send = x.data();
  b.dense_recv = y.data();
  b.dense_numel = 10;
  b.k = 2;  // node_residual missing
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                    Catch::Contains("needs non-null dense_send, dense_recv and node_residual"));
  b.node_residual = z.data();
  b.k = 11;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                    Catch::Contains("needs 1 <= k <= dense_numel"));
  b.k = 2;
  b.blocking_allreduce = true;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                    Catch::Contains("blocking_allreduce is set"));
  b.blocking_allreduce = false;
  omgs::GroupBuffers stray = b;
  stray.kind = omgs::WireKind::allreduce_node;
  stray.k = 0;
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {stray}, o),
                    Catch::Contains("node_residual (a sparse node-summed group's buffer)"));
  if (omgs_test::world_size() > 1) {
    // Node-summed on one rank, two-level dense on the others; then k differing.
    omgs::GroupBuffers one = omgs_test::world_rank() == 0 ? b : stray;
    if (omgs_test::world_rank() != 0) one.node_residual = nullptr;
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {one}, o), Catch::Contains("disagree"));
    omgs::GroupBuffers k = b;
    k.k = omgs_test::world_rank() == 0 ? 2 : 3;
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {k}, o),
                      Catch::Contains("ranks disagree on k"));
  }
}
