// The progress engine with sparse-allreduce groups (GroupBuffers::sparse_numel; a phased
// wire advanced beside MPI_Testsome) between allgather and dense groups, with a progress
// thread and inline, fixed and variable counts (k = 0 on some ranks), the caller's buffers
// or staged through host mirrors: each exchange equals
// the standalone SparseAllreduce fed the same pairs (itself checked against a reference in
// test_sparse_allreduce.cpp), every rank holds the same survivors, and survivors + every
// rank's dropped pairs hold all the mass. Disagreement on a group's collective and a rank
// that never submits end in the engine's named errors.
#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <omgs/comm.hpp>

#include "comm_test_data.hpp"
#include "mpi_world.hpp"
#include "omgs_catch.hpp"

using omgs::GroupBuffers;
using omgs::SparsePair;
using omgs::detail::SparseAllreduce;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

/// Up to k distinct indices below n, clustered differently per rank so that regions differ.
std::vector<SparsePair> pairs_of(int rank, int iter, std::size_t n, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(rank * 7919 + iter * 31 + 1));
  std::normal_distribution<float> val(0.0f, 1.0f);
  std::vector<SparsePair> out;
  std::vector<char> used(n, 0);
  const std::size_t start = (static_cast<std::size_t>(rank) * n / 3) % n;
  std::uniform_int_distribution<std::size_t> off(0, n / 2);
  while (out.size() < count) {
    const std::size_t i = (start + off(gen)) % n;
    if (used[i]) continue;
    used[i] = 1;
    out.push_back({static_cast<std::uint32_t>(i), val(gen)});
  }
  return out;
}

struct SaGroup {
  std::size_t n, k;
  std::vector<SparsePair> send, recv, dropped;
  omgs::PairWire wire = omgs::PairWire::pairs8;
  GroupBuffers buffers(int P) {
    send.resize(k);
    // GroupBuffers' sizes exactly: the most survivors (the threshold bin's ties cut), and
    // with a compact wire this region's survivors' rounding errors too.
    recv.resize(static_cast<std::size_t>(
        omgs::detail::sparse_allreduce::max_survivors(n, k, static_cast<std::uint64_t>(P))));
    dropped.resize(wire == omgs::PairWire::pairs8 ? k : k + recv.size());
    GroupBuffers b{send.data(), recv.data(), k};
    b.kind = omgs::WireKind::sparse_allreduce;
    b.sparse_numel = n;
    b.dropped = dropped.data();
    b.pair_wire = wire;
    return b;
  }
};

double sum_of(const SparsePair* p, std::size_t count) {
  double s = 0;
  for (std::size_t i = 0; i < count; ++i) s += p[i].value;
  return s;
}

}  // namespace

TEST_CASE("sparse-allreduce groups in the engine equal the standalone exchange",
          "[comm][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  for (const bool inline_mode : {false, true})
    for (const bool variable : {false, true})
      for (const bool staged : {false, true}) {
        INFO("inline " << inline_mode << ", variable counts " << variable << ", staged " << staged);
        // Groups: an allgather, a sparse allreduce, a dense one, another sparse allreduce.
        std::vector<SparsePair> ag_send(4), ag_recv(4 * static_cast<std::size_t>(P));
        std::vector<float> d_send(64, 1.0f), d_recv(64);
        SaGroup a{20000, 200, {}, {}, {}, {}}, b{300, 7, {}, {}, {}, {}};
        std::vector<GroupBuffers> groups(4);
        groups[0] = {ag_send.data(), ag_recv.data(), 4};
        groups[1] = a.buffers(P);
        groups[2].kind = omgs::WireKind::allreduce_sum;
        groups[2].dense_send = d_send.data();
        groups[2].dense_recv = d_recv.data();
        groups[2].dense_numel = 64;
        groups[3] = b.buffers(P);
        omgs::ProgressOptions o;
        o.read_environment = false;
        o.wait_timeout_s = 60;
        o.force_inline = inline_mode;
        o.variable_counts = variable;
        omgs_test_comm::CopyCounts copies;
        if (staged) omgs_test_comm::stage_through_host(o, copies);
        omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
        CHECK(e.stats().staging == staged);
        SparseAllreduce ref_a(MPI_COMM_WORLD, a.n, a.k), ref_b(MPI_COMM_WORLD, b.n, b.k);
        for (int iter = 0; iter < 12; ++iter) {
          // Variable counts: rank 0 sends nothing every third iteration.
          const bool none = variable && me == 0 && iter % 3 == 0;
          for (SaGroup* s : {&a, &b}) {
            const auto mine = pairs_of(me, iter, s->n, none ? 0 : s->k);
            std::copy(mine.begin(), mine.end(), s->send.begin());
          }
          const std::size_t ca = none ? 0 : a.k, cb = none ? 0 : b.k;
          for (int g = 3; g >= 0; --g) {  // submitted backwards; posted in plan order
            const std::size_t count = g == 1 ? ca : g == 3 ? cb : g == 0 ? 4 : 0;
            REQUIRE((variable ? e.submit(g, count) : e.submit(g)) == omgs::SubmitStatus::ok);
          }
          REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
          int g = 1;
          for (auto [s, ref, count] :
               {std::make_tuple(&a, &ref_a, ca), std::make_tuple(&b, &ref_b, cb)}) {
            ref->start(s->send.data(), count);
            REQUIRE(ref->wait(60.0));
            const auto& want = ref->survivors();
            REQUIRE(e.recv_total(g) == want.size());
            REQUIRE(e.dropped_total(g) == ref->dropped().size());
            for (std::size_t i = 0; i < want.size(); ++i) {
              REQUIRE(s->recv[i].index == want[i].index);
              REQUIRE(s->recv[i].value == want[i].value);
            }
            // No mass lost: the survivors' sum + every rank's dropped = every rank's pairs.
            double sums[2] = {sum_of(s->send.data(), count),
                              sum_of(s->dropped.data(), e.dropped_total(g))};
            MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            CHECK(std::abs(sum_of(s->recv.data(), e.recv_total(g)) + sums[1] - sums[0]) <
                  1e-3 * (1 + std::abs(sums[0])));
            CHECK(e.recv_counts(g)[0] == 0);
            g += 2;
          }
          CHECK(d_recv[5] == static_cast<float>(P));
        }
        const omgs::ProgressStats st = e.stats();
        CHECK(st.groups[1].bytes_received > 0);
        CHECK(e.group_stats(1).bytes_received == st.groups[1].bytes_received);
        CHECK(e.group_stats(1).completions == 12);
        CHECK(e.group_stats(4).posts == 0);  // no such group
        if (P > 1) CHECK(st.groups[1].bytes_sent > 0);
        CHECK((copies.to_host > 0) == staged);
        CHECK((copies.to_device > 0) == staged);
      }
}

TEST_CASE("compact sparse-allreduce groups in the engine equal the standalone exchange",
          "[comm][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  for (const omgs::PairWire wire : {omgs::PairWire::bf16, omgs::PairWire::fp16}) {
    INFO(omgs::to_string(wire));
    SaGroup a{50000, 100, {}, {}, {}, wire};
    omgs::ProgressOptions o;
    o.read_environment = false;
    o.wait_timeout_s = 60;
    o.variable_counts = true;
    omgs::ProgressEngine e(MPI_COMM_WORLD, {a.buffers(P)}, o);
    SparseAllreduce ref(MPI_COMM_WORLD, a.n, a.k, wire);
    std::uint64_t pairs = 0, bytes = 0;
    for (int iter = 0; iter < 6; ++iter) {
      const std::size_t count = me == 0 && iter % 3 == 0 ? 0 : a.k;  // k = 0 on rank 0
      const auto mine = pairs_of(me, iter, a.n, count);
      std::copy(mine.begin(), mine.end(), a.send.begin());
      REQUIRE(e.submit(0, count) == omgs::SubmitStatus::ok);
      REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
      ref.start(a.send.data(), count);
      REQUIRE(ref.wait(60.0));
      REQUIRE(e.recv_total(0) == ref.survivors().size());
      REQUIRE(e.dropped_total(0) == ref.dropped().size());
      for (std::size_t i = 0; i < ref.survivors().size(); ++i) {
        REQUIRE(a.recv[i].index == ref.survivors()[i].index);
        REQUIRE(a.recv[i].value == ref.survivors()[i].value);
      }
      for (std::size_t i = 0; i < ref.dropped().size(); ++i) {
        REQUIRE(a.dropped[i].index == ref.dropped()[i].index);
        REQUIRE(a.dropped[i].value == ref.dropped()[i].value);
      }
      pairs += ref.stats().pairs_sent;
      bytes += ref.stats().pair_bytes_sent;
    }
    CHECK(e.group_stats(0).pairs_sent == pairs);
    CHECK(e.group_stats(0).pair_bytes_sent == bytes);
    CHECK(bytes < 5 * pairs);  // about 4 bytes per pair, not 8
  }
}

TEST_CASE("a group sparse-allreduce on one rank and allgather or dense on another is refused",
          "[comm][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  if (P < 2) return;
  for (const bool dense : {false, true}) {
    SaGroup a{300, 0, {}, {}, {}, {}};
    std::vector<float> d(300);
    GroupBuffers b = a.buffers(P);
    if (me == P - 1) {
      b = GroupBuffers{};
      if (dense) {
        b.kind = omgs::WireKind::allreduce_sum;
        b.dense_send = d.data();
        b.dense_recv = d.data();
        b.dense_numel = 300;
      }
    }
    omgs::ProgressOptions o;
    o.read_environment = false;
    CHECK_THROWS_WITH(
        omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
        Catch::Contains("ranks disagree on the collective") && Catch::Contains("of group 0"));
  }
}

TEST_CASE("a rank that never submits a sparse-allreduce group is named by the watchdog",
          "[comm][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  if (P < 2) return;
  SaGroup a{1000, 10, {}, {}, {}, {}};
  omgs::ProgressOptions o;
  o.read_environment = false;
  omgs::ProgressEngine e(MPI_COMM_WORLD, {a.buffers(P)}, o);
  const auto mine = pairs_of(me, 0, a.n, a.k);
  std::copy(mine.begin(), mine.end(), a.send.begin());
  if (me != P - 1) {
    REQUIRE(e.submit(0) == omgs::SubmitStatus::ok);
    CHECK(e.wait(0, 0.3) == omgs::WaitStatus::timeout);
    const omgs::Diagnosis d = e.diagnose(0, 2.0);
    INFO(d.report);
    REQUIRE(d.lagging.size() == 1);
    CHECK(d.lagging[0] == P - 1);
  } else {
    // Answers the watchdog queries from its progress thread, then joins.
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == P - 1) REQUIRE(e.submit(0) == omgs::SubmitStatus::ok);
  REQUIRE(e.wait(0, 60) == omgs::WaitStatus::ok);
  CHECK(e.recv_total(0) >= a.k);
}
