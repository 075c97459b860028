// omgs::ProgressEngine under MPI: data correctness, plan order, variable counts, inline
// mode, staging through host mirrors. Set-up, pinning, shutdown and the steady state's
// memory: test_comm_setup.cpp.
#include <omgs/comm.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

using namespace omgs_test_comm;

TEST_CASE("every rank's pairs arrive at every rank, many groups of different k", "[comm]") {
  const int P = world_size();
  Buffers b(kKs, P);
  ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
  REQUIRE(e.num_groups() == static_cast<int>(kKs.size()));
  REQUIRE(e.ranks() == P);
  REQUIRE(e.rank() == world_rank());
  CHECK(e.mode() == omgs::ProgressMode::thread);  // the test main asks for MULTIPLE
  long bad = 0;
  for (int iter = 0; iter < 20; ++iter) {
    for (int g = 0; g < e.num_groups(); ++g) {
      fill(b, g, iter, kKs[static_cast<std::size_t>(g)]);
      REQUIRE(e.submit(g) == SubmitStatus::ok);
      REQUIRE(e.wait(g) == WaitStatus::ok);
      bad += check(b, e, g, iter, fixed_counts(kKs[static_cast<std::size_t>(g)]));
    }
  }
  CHECK(bad == 0);
  const omgs::ProgressStats s = e.stats();
  CHECK(s.groups_completed == 20 * kKs.size());
  CHECK(s.collectives_posted == 20 * kKs.size());
  CHECK(s.mpi_errors == 0);
  std::uint64_t sent = 0;
  for (std::size_t k : kKs) sent += 20 * k * sizeof(SparsePair);
  CHECK(s.bytes_sent == sent);
  CHECK(s.bytes_received == sent * static_cast<std::uint64_t>(P));
  for (const auto& gs : s.groups) {
    CHECK(gs.posts == 20);
    CHECK(gs.completions == 20);
    CHECK(gs.last_complete_s >= gs.last_post_s);
    CHECK(gs.last_post_s >= gs.last_submit_s);
  }
}

TEST_CASE("groups posted while others are in flight; out-of-order submits post in plan order",
          "[comm]") {
  const int P = world_size();
  Buffers b(kKs, P);
  ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
  const int G = e.num_groups();
  long bad = 0;
  for (int iter = 0; iter < 30; ++iter) {
    for (int g = 0; g < G; ++g) fill(b, g, iter, kKs[static_cast<std::size_t>(g)]);
    // Odd ranks submit backwards: the engine still posts 0, 1, ..., G-1 everywhere.
    for (int j = 0; j < G; ++j) {
      const int g = world_rank() % 2 == 1 ? G - 1 - j : j;
      REQUIRE(e.submit(g) == SubmitStatus::ok);
    }
    CHECK(e.submit(0) == SubmitStatus::busy);  // not yet reported complete
    // Consume completions in whatever order they come.
    int seen = 0;
    std::vector<int> got(static_cast<std::size_t>(G), 0);
    while (seen < G) {
      int g = -1;
      if (e.poll_completed(g)) {
        ++got[static_cast<std::size_t>(g)];
        bad += check(b, e, g, iter, fixed_counts(kKs[static_cast<std::size_t>(g)]));
        ++seen;
      }
    }
    for (int c : got) CHECK(c == 1);
    const omgs::ProgressStats s = e.stats();
    for (int g = 1; g < G; ++g) {
      CHECK(s.groups[static_cast<std::size_t>(g)].last_post_s >=
            s.groups[static_cast<std::size_t>(g - 1)].last_post_s);
    }
  }
  CHECK(bad == 0);
  int g = -1;
  CHECK_FALSE(e.poll_completed(g));
  CHECK(e.wait(0, 0.1) == WaitStatus::not_submitted);
}

TEST_CASE("pipelined: group g+1 submitted before g is waited for; wait keeps other completions",
          "[comm]") {
  Buffers b(kKs, world_size());
  ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
  const int G = e.num_groups();
  long bad = 0;
  for (int iter = 0; iter < 20; ++iter) {
    for (int g = 0; g < G; ++g) {
      fill(b, g, iter, kKs[static_cast<std::size_t>(g)]);
      REQUIRE(e.submit(g) == SubmitStatus::ok);
    }
    // Wait for the last first: the others' completions go to the pending list.
    REQUIRE(e.wait(G - 1) == WaitStatus::ok);
    for (int g = 0; g < G - 1; ++g) REQUIRE(e.wait(g) == WaitStatus::ok);
    for (int g = 0; g < G; ++g)
      bad += check(b, e, g, iter, fixed_counts(kKs[static_cast<std::size_t>(g)]));
  }
  CHECK(bad == 0);
  // wait_all consumes every completion.
  for (int g = 0; g < G; ++g) REQUIRE(e.submit(g) == SubmitStatus::ok);
  CHECK(e.wait_all() == WaitStatus::ok);
  int g = -1;
  CHECK_FALSE(e.poll_completed(g));
}

TEST_CASE("variable counts: a count exchange is chained before each MPI_Iallgatherv", "[comm]") {
  const int P = world_size();
  Buffers b(kKs, P);
  ProgressOptions o = quiet_options();
  o.variable_counts = true;
  ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
  const int G = e.num_groups();
  CHECK(e.submit(1, kKs[1] + 1) == SubmitStatus::bad_group);  // count > k
  long bad = 0;
  std::uint64_t posted = 0;
  for (int iter = 0; iter < 25; ++iter) {
    for (int g = 0; g < G; ++g) {
      const std::size_t k = kKs[static_cast<std::size_t>(g)];
      auto count_of = [&](int r) {
        return k == 0 ? 0 : static_cast<std::size_t>(r + g + iter) % (k + 1);
      };
      fill(b, g, iter, count_of(world_rank()));
      REQUIRE(e.submit(g, count_of(world_rank())) == SubmitStatus::ok);
      ++posted;
      std::vector<std::size_t> counts;
      for (int r = 0; r < P; ++r) counts.push_back(count_of(r));
      if (g % 3 == 2 || g == G - 1) {
        // Wait for the groups submitted since the last wait.
        for (int h = g - (g % 3 == 2 ? 2 : g % 3); h <= g; ++h) {
          REQUIRE(e.wait(h) == WaitStatus::ok);
          const std::size_t kh = kKs[static_cast<std::size_t>(h)];
          std::vector<std::size_t> ch;
          for (int r = 0; r < P; ++r)
            ch.push_back(kh == 0 ? 0 : static_cast<std::size_t>(r + h + iter) % (kh + 1));
          bad += check(b, e, h, iter, ch);
        }
      }
    }
  }
  CHECK(bad == 0);
  const omgs::ProgressStats s = e.stats();
  CHECK(s.variable_counts);
  CHECK(s.collectives_posted == 2 * posted);  // counts + pairs per group
  CHECK(s.groups_completed == posted);
}

TEST_CASE("inline mode (forced): the owner's calls drive MPI; back-pressure without loss",
          "[comm]") {
  Buffers b(kKs, world_size());
  ProgressOptions o = quiet_options();
  o.force_inline = true;
  o.queue_capacity = 4;
  ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
  CHECK(e.mode() == omgs::ProgressMode::inline_);
  const omgs::ProgressStats s0 = e.stats();
  CHECK(s0.mode == omgs::ProgressMode::inline_);
  CHECK(s0.pinned_pu == -1);
  CHECK(s0.pin_note.find("inline") != std::string::npos);
  const int G = e.num_groups();
  long bad = 0;
  for (int iter = 0; iter < 10; ++iter) {
    int next = 0;
    int full = 0;
    while (next < G) {
      fill(b, next, iter, kKs[static_cast<std::size_t>(next)]);
      const SubmitStatus st = e.submit(next);
      if (st == SubmitStatus::ok) {
        ++next;
      } else {
        REQUIRE(st == SubmitStatus::queue_full);
        ++full;
        e.progress();  // drains the submit queue into posted collectives
      }
    }
    CHECK(full > 0);  // 12 groups through a queue of 4 without progress in between
    REQUIRE(e.wait_all() == WaitStatus::ok);
    for (int g = 0; g < G; ++g)
      bad += check(b, e, g, iter, fixed_counts(kKs[static_cast<std::size_t>(g)]));
  }
  CHECK(bad == 0);
  CHECK(e.stats().groups_completed == static_cast<std::uint64_t>(10 * G));
}

TEST_CASE("device buffers without GPU-aware MPI are staged through host mirrors", "[comm]") {
  // No GPU here: "device" buffers are host memory and the copy functions count calls,
  // which exercises the staging path end to end.
  Buffers b(kKs, world_size());
  ProgressOptions o = quiet_options();
  o.buffer_space = omgs::MemorySpace::device;
  o.gpu_aware = omgs::GpuAwareMpi::no;
  CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, b.groups, o), omgs::Error);  // no copy fns
  CopyCounts copies;
  stage_through_host(o, copies);
  ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
  CHECK(e.stats().staging);
  CHECK_FALSE(e.stats().gpu_aware_mpi);
  long bad = 0;
  const int G = e.num_groups();
  for (int iter = 0; iter < 5; ++iter) {
    for (int g = 0; g < G; ++g) {
      fill(b, g, iter, kKs[static_cast<std::size_t>(g)]);
      REQUIRE(e.submit(g) == SubmitStatus::ok);
    }
    REQUIRE(e.wait_all() == WaitStatus::ok);
    for (int g = 0; g < G; ++g)
      bad += check(b, e, g, iter, fixed_counts(kKs[static_cast<std::size_t>(g)]));
  }
  CHECK(bad == 0);
  CHECK(copies.to_host == 5 * (G - 1));  // group 3 has k = 0: nothing to copy
  CHECK(copies.to_device == 5 * (G - 1));
  // GPU-aware: device pointers go straight to MPI, no staging.
  o.gpu_aware = omgs::GpuAwareMpi::yes;
  ProgressEngine direct(MPI_COMM_WORLD, b.groups, o);
  CHECK_FALSE(direct.stats().staging);
}
