// Counts past one MPI call (issue 48): the dense allreduce wire splits a group of more floats
// than one post may pass (detail::max_post_count(): INT_MAX without MPI 4's large-count calls)
// over several allreduces of consecutive slices. A test-only limit (set_max_post_count, or
// OMGS_MAX_POST_COUNT) makes the split run on small buffers: the sums equal the unsplit
// ones and the exact sum, with a progress thread, inline, staged, and blocking; dense groups
// split and whole interleaved with allgather groups; the 16-bit dense wire's shards in
// messages of the limit, equal to the unsplit ones bit for bit. Ranks that split differently,
// and a bad OMGS_MAX_POST_COUNT, are refused on every rank.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/error.hpp>

#include "comm/wire.hpp"
#include "comm_test_data.hpp"
#include "mpi_world.hpp"
#include "omgs_catch.hpp"

using omgs::GroupBuffers;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

float value_of(int rank, int g, int iter, std::size_t i) {
  return static_cast<float>(rank + 1) + static_cast<float>(g + iter) +
         static_cast<float>(i % 13);  // small integers: every summation order is exact
}

struct Run {
  bool inline_mode = false, staged = false, blocking = false;
};

/// Dense groups of `sizes` floats between allgather groups of 3 pairs: each iteration's sums.
std::vector<std::vector<float>> run_dense(const std::vector<std::size_t>& sizes, const Run& how) {
  const int P = world_size(), me = world_rank();
  const int G = static_cast<int>(2 * sizes.size());
  std::vector<std::vector<float>> send(sizes.size()), recv(sizes.size()), out;
  std::vector<std::vector<omgs::SparsePair>> psend(sizes.size()), precv(sizes.size());
  std::vector<GroupBuffers> groups(static_cast<std::size_t>(G));
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    send[d].resize(sizes[d]);
    recv[d].resize(sizes[d]);
    GroupBuffers& b = groups[2 * d];
    b.kind = omgs::WireKind::allreduce_sum;
    b.dense_send = send[d].data();
    b.dense_recv = recv[d].data();
    b.dense_numel = sizes[d];
    b.blocking_allreduce = how.blocking;
    psend[d].resize(3);
    precv[d].resize(3 * static_cast<std::size_t>(P));
    groups[2 * d + 1] = {psend[d].data(), precv[d].data(), 3};
  }
  omgs::ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.force_inline = how.inline_mode;
  omgs_test_comm::CopyCounts copies;
  if (how.staged) omgs_test_comm::stage_through_host(o, copies);
  omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
  for (int iter = 0; iter < 3; ++iter) {
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      for (std::size_t i = 0; i < sizes[d]; ++i)
        send[d][i] = value_of(me, static_cast<int>(d), iter, i);
      for (std::uint32_t i = 0; i < 3; ++i)
        psend[d][i] = {static_cast<std::uint32_t>(me) * 3 + i, static_cast<float>(iter)};
    }
    for (int g = G - 1; g >= 0; --g) REQUIRE(e.submit(g) == omgs::SubmitStatus::ok);
    REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      out.push_back(recv[d]);
      for (std::size_t i = 0; i < 3 * static_cast<std::size_t>(P); ++i)
        REQUIRE(precv[d][i].index == i);
      CHECK(e.group_stats(static_cast<int>(2 * d)).bytes_sent ==  // summed over the iterations
            static_cast<std::uint64_t>(iter + 1) * sizes[d] * sizeof(float));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a dense group split over posts of a lowered limit equals the unsplit one",
          "[comm][large_count]") {
  const int P = world_size();
  // 64 floats per post: 1000 in 16 posts (the last of 40), 64 in one, 65 in two (the last of 1).
  const std::vector<std::size_t> sizes = {1000, 64, 65, 1, 7};
  for (const Run how : {Run{false, false, false}, Run{true, false, false}, Run{false, true, false},
                        Run{false, false, true}}) {
    INFO("inline " << how.inline_mode << ", staged " << how.staged << ", blocking "
                   << how.blocking);
    omgs::detail::set_max_post_count(0);
    const auto whole = run_dense(sizes, how);
    omgs::detail::set_max_post_count(64);
    const auto split = run_dense(sizes, how);
    omgs::detail::set_max_post_count(0);
    REQUIRE(split.size() == whole.size());
    for (std::size_t x = 0; x < whole.size(); ++x) {
      const std::size_t d = x % sizes.size();
      const int iter = static_cast<int>(x / sizes.size());
      REQUIRE(split[x].size() == sizes[d]);
      for (std::size_t i = 0; i < sizes[d]; ++i) {
        float want = 0;
        for (int r = 0; r < P; ++r) want += value_of(r, static_cast<int>(d), iter, i);
        REQUIRE(whole[x][i] == want);
        REQUIRE(split[x][i] == want);
      }
    }
  }
}

namespace {

/// 16-bit dense groups of `sizes` values (bf16 or fp16), 2 iterations: each one's means.
std::vector<std::vector<std::uint16_t>> run_dense16(const std::vector<std::size_t>& sizes,
                                                    bool brain, bool blocking) {
  const int me = world_rank();
  std::vector<std::vector<std::uint16_t>> send(sizes.size()), recv(sizes.size()), out;
  std::vector<GroupBuffers> groups(sizes.size());
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    send[g].resize(sizes[g]);
    recv[g].resize(sizes[g]);
    groups[g].kind = omgs::WireKind::allreduce_mean16;
    groups[g].dense16_send = send[g].data();
    groups[g].dense16_recv = recv[g].data();
    groups[g].dense_numel = sizes[g];
    groups[g].dense_wire = brain ? omgs::DenseWire::bf16 : omgs::DenseWire::fp16;
    groups[g].blocking_allreduce = blocking;
  }
  omgs::ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
  for (int iter = 0; iter < 2; ++iter) {
    for (std::size_t g = 0; g < sizes.size(); ++g)
      for (std::size_t i = 0; i < sizes[g]; ++i)  // bf16 and fp16 bit patterns of small values
        send[g][i] = static_cast<std::uint16_t>(0x3c00 + (me * 131 + iter * 17 + i * 7) % 512);
    for (int g = static_cast<int>(sizes.size()) - 1; g >= 0; --g)
      REQUIRE(e.submit(g) == omgs::SubmitStatus::ok);
    REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
    for (const auto& r : recv) out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("a 16-bit dense group in messages of a lowered limit equals the unsplit one",
          "[comm][large_count]") {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  // Shards of 1000 / P values in messages of 7 or 64; 65 and 7 values; one value (n < P).
  const std::vector<std::size_t> sizes = {1000, 65, 7, 1};
  for (const bool brain : {true, false})
    for (const bool blocking : {false, true}) {
      if (blocking && level < MPI_THREAD_SERIALIZED) continue;  // needs the progress thread
      INFO("bf16 " << brain << ", blocking " << blocking);
      omgs::detail::set_max_post_count(0);
      const auto whole = run_dense16(sizes, brain, blocking);
      for (const std::uint64_t limit : {7u, 64u}) {
        omgs::detail::set_max_post_count(limit);
        const auto split = run_dense16(sizes, brain, blocking);
        omgs::detail::set_max_post_count(0);
        REQUIRE(split == whole);
      }
    }
}

TEST_CASE("ranks that split a dense group differently, or a bad OMGS_MAX_POST_COUNT, are refused",
          "[comm][large_count]") {
  const int P = world_size(), me = world_rank();
  std::vector<float> send(100, 1.0f), recv(100);
  GroupBuffers b;
  b.kind = omgs::WireKind::allreduce_sum;
  b.dense_send = send.data();
  b.dense_recv = recv.data();
  b.dense_numel = send.size();
  omgs::ProgressOptions o;
  o.read_environment = false;
  if (P > 1) {
    omgs::detail::set_max_post_count(me == 0 ? 10 : 0);
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                      Catch::Contains("ranks disagree on the elements per post"));
    omgs::detail::set_max_post_count(0);
  }
  for (const char* bad : {"0", "-5", "12x"}) {
    INFO("OMGS_MAX_POST_COUNT='" << bad << "'");
    setenv("OMGS_MAX_POST_COUNT", bad, 1);
    CHECK_THROWS_WITH(omgs::ProgressEngine(MPI_COMM_WORLD, {b}, o),
                      Catch::Contains("OMGS_MAX_POST_COUNT='" + std::string(bad) + "'"));
  }
  setenv("OMGS_MAX_POST_COUNT", "30", 1);
  CHECK(omgs::detail::max_post_count() == 30);
  {
    omgs::ProgressEngine e(MPI_COMM_WORLD, {b}, o);  // 4 posts of 30, 30, 30 and 10
    REQUIRE(e.submit(0) == omgs::SubmitStatus::ok);
    REQUIRE(e.wait_all() == omgs::WaitStatus::ok);
    for (const float v : recv) REQUIRE(v == static_cast<float>(P));
  }
  unsetenv("OMGS_MAX_POST_COUNT");
  CHECK(omgs::detail::max_post_count() >= static_cast<std::uint64_t>(INT32_MAX));
}
