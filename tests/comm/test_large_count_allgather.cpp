// Counts past one MPI call for the pairs' allgather (issue 48): P k may pass an int (LLaMA-7B's
// k = 6.7 M at P >= 321), and without MPI 4's MPI_Iallgatherv_c the wire splits an exchange
// over several allgathervs of consecutive slices of the receive buffer. A test-only limit
// (set_max_post_count) makes the split run on small buffers: every rank's pairs land where
// the unsplit exchange puts them, with the same counts and displacements, in fixed and
// variable-count mode, with a progress thread, inline and staged; limits that cut a rank's
// pairs, that fit several ranks in one post, of one pair, and one past P k. The slicing
// alone is checked without MPI.
#include <mpi.h>

#include <cstdint>
#include <vector>

#include <omgs/comm.hpp>

#include "comm/allgatherv_slices.hpp"
#include "comm/wire.hpp"
#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

using omgs::GroupBuffers;
using omgs::detail::slice_of;
using omgs::detail::slice_posts;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

struct Run {
  bool variable = false, inline_mode = false, staged = false;
};

/// What one exchange left on this rank: the receive buffer, the counts and displacements.
struct Result {
  std::vector<omgs::SparsePair> recv;
  std::vector<std::uint64_t> counts, displs;
  std::uint64_t total = 0, bytes_received = 0;
};

/// Rank r's pairs in group g at iteration iter: k of them, or 1 + (r + iter) % k (variable).
std::size_t count_of(int r, std::size_t k, int iter, bool variable) {
  return variable ? 1 + static_cast<std::size_t>(r + iter) % k : k;
}

/// Groups of `ks` pairs and a dense group of 100 floats after them, 3 iterations.
std::vector<Result> run_groups(const std::vector<std::size_t>& ks, const Run& how) {
  const int P = world_size(), me = world_rank();
  omgs_test_comm::Buffers b(ks, P);
  std::vector<float> dsend(100, 1.0f), drecv(100);
  GroupBuffers dense;
  dense.kind = omgs::WireKind::allreduce_sum;
  dense.dense_send = dsend.data();
  dense.dense_recv = drecv.data();
  dense.dense_numel = dsend.size();
  std::vector<GroupBuffers> groups = b.groups;
  groups.push_back(dense);
  const int D = static_cast<int>(ks.size());
  omgs::ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.variable_counts = how.variable;
  o.force_inline = how.inline_mode;
  omgs_test_comm::CopyCounts copies;
  if (how.staged) omgs_test_comm::stage_through_host(o, copies);
  omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
  std::vector<Result> out;
  for (int iter = 0; iter < 3; ++iter) {
    for (std::size_t x = 0; x < ks.size(); ++x) {
      const std::size_t c = count_of(me, ks[x], iter, how.variable);
      omgs_test_comm::fill(b, static_cast<int>(x), iter, c);
      REQUIRE(e.submit(static_cast<int>(x), c) == omgs::SubmitStatus::ok);
    }
    REQUIRE(e.submit(D, 0) == omgs::SubmitStatus::ok);
    REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
    for (const float v : drecv) REQUIRE(v == static_cast<float>(P));
    for (std::size_t x = 0; x < ks.size(); ++x) {
      const int g = static_cast<int>(x);
      std::vector<std::size_t> counts;
      for (int r = 0; r < P; ++r) counts.push_back(count_of(r, ks[x], iter, how.variable));
      CHECK(omgs_test_comm::check(b, e, g, iter, counts) == 0);
      Result r;
      r.total = e.recv_total(g);
      r.recv.assign(b.recv[x].begin(), b.recv[x].begin() + static_cast<long>(r.total));
      r.counts.assign(e.recv_counts(g), e.recv_counts(g) + P);
      r.displs.assign(e.recv_displs(g), e.recv_displs(g) + P);
      r.bytes_received = e.group_stats(g).bytes_received;
      out.push_back(std::move(r));
    }
  }
  return out;
}

bool same(const Result& a, const Result& b) {
  if (a.recv.size() != b.recv.size() || a.counts != b.counts || a.displs != b.displs ||
      a.total != b.total || a.bytes_received != b.bytes_received)
    return false;
  for (std::size_t i = 0; i < a.recv.size(); ++i)
    if (a.recv[i].index != b.recv[i].index || a.recv[i].value != b.recv[i].value) return false;
  return true;
}

}  // namespace

TEST_CASE("the slices of a split allgatherv cover every rank's items once, none past the limit",
          "[comm][large_count]") {
  CHECK(slice_posts(0, 5) == 1);
  CHECK(slice_posts(5, 5) == 1);
  CHECK(slice_posts(6, 5) == 2);
  CHECK(slice_posts(std::uint64_t{6700000} * 4096, 2147483647) == 13);
  CHECK(slice_posts(UINT64_MAX / 2, UINT64_MAX) == 1);
  const std::vector<std::uint64_t> counts = {3, 0, 7, 1, 4};
  std::vector<std::uint64_t> displs = {0};
  for (std::size_t r = 1; r < counts.size(); ++r) displs.push_back(displs[r - 1] + counts[r - 1]);
  const std::uint64_t total = 15;
  for (const std::uint64_t limit : {1, 2, 3, 4, 7, 15, 16}) {
    INFO("limit " << limit);
    for (std::size_t me = 0; me < counts.size(); ++me) {
      std::vector<int> seen(total, 0);
      std::uint64_t mine_total = 0;
      for (std::uint64_t s = 0; s < slice_posts(total, limit); ++s) {
        std::vector<int> c(counts.size()), d(counts.size());
        int mine = -1;
        const std::uint64_t from = slice_of(s, limit, counts.data(), displs.data(), counts.size(),
                                            me, c.data(), d.data(), &mine);
        REQUIRE(mine == c[me]);
        if (mine > 0) REQUIRE(from == mine_total);  // this rank's items go out in order
        mine_total += static_cast<std::uint64_t>(mine);
        for (std::size_t r = 0; r < counts.size(); ++r) {
          REQUIRE(static_cast<std::uint64_t>(c[r]) <= limit);
          REQUIRE(static_cast<std::uint64_t>(d[r] + c[r]) <= limit);
          for (int i = 0; i < c[r]; ++i) ++seen[s * limit + static_cast<std::uint64_t>(d[r] + i)];
        }
      }
      REQUIRE(mine_total == counts[me]);
      for (const int n : seen) REQUIRE(n == 1);
    }
  }
}

TEST_CASE("an allgather split over posts of a lowered limit equals the unsplit one",
          "[comm][large_count]") {
  const int P = world_size();
  // k = 10, 1, 7: limits that cut a rank's pairs (3, 7), put several ranks in one post (16),
  // one pair a post (1), and P k + 1 (one post: not split).
  const std::vector<std::size_t> ks = {10, 1, 7};
  for (const Run how : {Run{false, false, false}, Run{true, false, false}, Run{false, true, false},
                        Run{true, true, false}, Run{false, false, true}, Run{true, false, true}}) {
    INFO("variable " << how.variable << ", inline " << how.inline_mode << ", staged "
                     << how.staged);
    omgs::detail::set_max_post_count(0);
    const auto whole = run_groups(ks, how);
    for (const int limit : {3, 7, 16, 1, 10 * P + 1}) {
      INFO("limit " << limit);
      omgs::detail::set_max_post_count(static_cast<std::uint64_t>(limit));
      const auto split = run_groups(ks, how);
      omgs::detail::set_max_post_count(0);
      REQUIRE(split.size() == whole.size());
      for (std::size_t x = 0; x < whole.size(); ++x) REQUIRE(same(split[x], whole[x]));
    }
  }
}

TEST_CASE("ranks that split an allgather differently are refused on every rank",
          "[comm][large_count]") {
  const int P = world_size(), me = world_rank();
  if (P == 1) return;
  std::vector<omgs::SparsePair> send(4), recv(4 * static_cast<std::size_t>(P));
  const GroupBuffers b{send.data(), recv.data(), 4};
  omgs::ProgressOptions o;
  o.read_environment = false;
  omgs::detail::set_max_post_count(me == 0 ? 3 : 0);
  CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                    Catch::Contains("ranks disagree on the elements per post"));
  omgs::detail::set_max_post_count(0);
}
