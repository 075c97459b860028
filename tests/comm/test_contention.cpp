// The progress engine on a loaded machine: the bounded back-off of every polling loop,
// the rank layout that decides whether the progress thread is pinned, and exchanges that
// complete while busy threads compete for every core (nothing here assumes idle cores:
// timing checks are lower bounds, or upper bounds orders of magnitude above the expected).
#include <omgs/comm.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../../src/comm/backoff.hpp"
#include "../../src/comm/clock.hpp"
#include "../../src/comm/layout.hpp"
#include "../runtime/runtime_test_support.hpp"
#include "omgs_catch.hpp"

namespace {

using omgs::ProgressEngine;
using omgs::ProgressOptions;
using omgs::SparsePair;
using Seconds = std::chrono::duration<double>;

using omgs_test::world_rank;
using omgs_test::world_size;

double time_pauses(omgs::detail::Backoff& b, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) b.pause();
  return Seconds(std::chrono::steady_clock::now() - t0).count();
}

ProgressOptions options() {
  ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 120;
  o.shutdown_timeout_s = 30;
  return o;
}

/// Threads that spin until told to stop: the load of other ranks / OpenMP workers.
struct BusyThreads {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  explicit BusyThreads(unsigned n) {
    for (unsigned i = 0; i < n; ++i)
      threads.emplace_back([this] {
        volatile unsigned long x = 0;
        while (!stop.load(std::memory_order_relaxed)) x = x + 1;
      });
  }
  ~BusyThreads() {
    stop.store(true);
    for (std::thread& t : threads) t.join();
  }
};

}  // namespace

TEST_CASE("back-off: spins, yields, then sleeps with a doubling period that is bounded",
          "[comm][contention]") {
  omgs::IdleOptions idle;
  idle.spin_iterations = 3;
  idle.yield_iterations = 2;
  idle.sleep_s = 1e-3;
  idle.max_sleep_s = 4e-3;
  omgs::detail::Backoff b(idle);
  time_pauses(b, 5);
  CHECK(b.sleeping());
  // 1 + 2 + 4 + 4 + 4 ms at least (sleep_for never returns early).
  CHECK(time_pauses(b, 5) >= 15e-3);
  // Bounded: 200 more pauses of at most 4 ms each; unbounded doubling would take years.
  CHECK(time_pauses(b, 200) < 200 * 4e-3 + 30.0);
  b.reset();
  CHECK(!b.sleeping());
  // After reset the period starts again at sleep_s: 3 spins + 2 yields + 1 ms + 2 ms.
  const double after_reset = time_pauses(b, 7);
  CHECK(after_reset >= 3e-3);
  CHECK(after_reset < 30.0);
  // With operations in flight the sleep stays at sleep_s and the doubling does not advance.
  time_pauses(b, 5);
  CHECK(b.next_sleep_s() == 4e-3);
  b.reset();
  time_pauses(b, 5);
  for (int i = 0; i < 4; ++i) b.pause(/*in_flight=*/true);
  CHECK(b.next_sleep_s() == 1e-3);
  b.pause();
  CHECK(b.next_sleep_s() == 2e-3);
  // max_sleep_s below sleep_s is raised to it; negative counts are taken as 0.
  idle.spin_iterations = -5;
  idle.yield_iterations = -1;
  idle.max_sleep_s = 0;
  omgs::detail::Backoff c(idle);
  c.pause();
  CHECK(c.sleeping());
  CHECK(time_pauses(c, 3) >= 3e-3);
}

#if defined(CLOCK_THREAD_CPUTIME_ID)  // elsewhere thread_cpu_s() is the wall clock
TEST_CASE("the thread CPU clock counts this thread's work, not its sleep or other threads'",
          "[comm][contention]") {
  using omgs::detail::now_s;
  using omgs::detail::thread_cpu_s;
  // Asleep while another thread spins: the wall clock moves, this thread's CPU clock hardly.
  double cpu0 = thread_cpu_s(), wall0 = now_s();
  {
    BusyThreads busy(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  const double slept_cpu = thread_cpu_s() - cpu0, slept_wall = now_s() - wall0;
  CHECK(slept_wall >= 0.06);
  CHECK(slept_cpu >= 0);
  CHECK(slept_cpu < 0.03);
  // Working: the CPU clock moves, and never ahead of the wall clock (beyond its resolution).
  cpu0 = thread_cpu_s();
  wall0 = now_s();
  volatile double x = 0;
  while (thread_cpu_s() - cpu0 < 0.02) x = x + 1;
  const double worked_cpu = thread_cpu_s() - cpu0, worked_wall = now_s() - wall0;
  CHECK(worked_cpu >= 0.02);
  CHECK(worked_cpu <= worked_wall + 1e-3);
}
#endif

TEST_CASE("rank layout: threads wanted, oversubscription, description", "[comm][contention]") {
  omgs::detail::RankLayout l;
  l.sharing_ranks = 4;
  l.compute_threads = 2;
  l.cores = 2;
  CHECK(omgs::detail::threads_wanted(l) == 12);
  CHECK(omgs::detail::oversubscribed(l));
  CHECK(omgs::detail::describe(l) ==
        "4 ranks x (2 compute threads + 1 progress thread) = 12 threads on 2 cores");
  l.sharing_ranks = 1;
  l.compute_threads = 1;
  l.cores = 2;
  CHECK(!omgs::detail::oversubscribed(l));
  CHECK(omgs::detail::describe(l) ==
        "1 rank x (1 compute thread + 1 progress thread) = 2 threads on 2 cores");
  l.cores = 1;
  CHECK(omgs::detail::oversubscribed(l));
}

TEST_CASE("an oversubscribed layout's progress thread and wait() sleep without spinning",
          "[comm][contention]") {
  omgs::IdleOptions idle;  // defaults: spin, then yield, then sleep
  omgs::detail::RankLayout l;
  l.sharing_ranks = 1;
  l.compute_threads = 1;
  l.cores = 2;
  const omgs::IdleOptions fits = omgs::detail::idle_for_layout(idle, l);
  CHECK(fits.spin_iterations == idle.spin_iterations);
  CHECK(fits.yield_iterations == idle.yield_iterations);
  l.sharing_ranks = 2;  // 2 ranks x (1 + 1) threads on 2 cores
  const omgs::IdleOptions over = omgs::detail::idle_for_layout(idle, l);
  CHECK(over.spin_iterations == 0);
  CHECK(over.yield_iterations == 0);
  CHECK(over.sleep_s == idle.sleep_s);
  CHECK(over.max_sleep_s == idle.max_sleep_s);
  omgs::detail::Backoff b(over);
  CHECK(b.sleeping());  // the first empty poll already sleeps
}

TEST_CASE("automatic pinning: an oversubscribed layout leaves the progress thread unpinned",
          "[comm][contention]") {
  std::vector<SparsePair> send(4), recv(4 * static_cast<std::size_t>(world_size()));
  const std::vector<omgs::GroupBuffers> groups = {{send.data(), recv.data(), 4}};
  ProgressOptions o = options();
  o.compute_threads = 1 << 20;  // more than any machine has cores
  ProgressEngine e(MPI_COMM_WORLD, groups, o);
  const omgs::ProgressStats s = e.stats();
  INFO(s.pin_note);
  CHECK(e.pinned_pu() == -1);
  if (s.mode == omgs::ProgressMode::thread) {
    CHECK(s.pin_note.find("oversubscribed") != std::string::npos);
    CHECK(s.pin_note.find("1048576 compute threads") != std::string::npos);
  }
  // An explicit PU is still honoured: the user decided.
  o.pin = {omgs::PinPolicy::pu, 0};
  ProgressEngine explicit_pin(MPI_COMM_WORLD, groups, o);
  INFO(explicit_pin.stats().pin_note);
  if (explicit_pin.stats().mode == omgs::ProgressMode::thread)
    CHECK(explicit_pin.stats().pin_note.find("oversubscribed") == std::string::npos);
}

TEST_CASE("the engine and the runtime bound the shutdown drain alike by default",
          "[comm][contention]") {
  CHECK(ProgressOptions{}.shutdown_timeout_s == omgs::RuntimeOptions{}.shutdown_timeout_s);
  CHECK(ProgressOptions{}.idle.max_sleep_s >= ProgressOptions{}.idle.sleep_s);
}

TEST_CASE("bad back-off or thread options fail on every rank, naming the option",
          "[comm][contention]") {
  std::vector<SparsePair> send(2), recv(2 * static_cast<std::size_t>(world_size()));
  const std::vector<omgs::GroupBuffers> groups = {{send.data(), recv.data(), 2}};
  // The rank with the bad option names it; the others throw too, pointing at that rank.
  auto fails_with = [&](const ProgressOptions& o, bool here, const char* what) {
    try {
      ProgressEngine e(MPI_COMM_WORLD, groups, o);
      FAIL("accepted: " << what);
    } catch (const omgs::Error& err) {
      INFO(err.what());
      CHECK(std::string(err.what()).find(here ? what : "rejected its input") != std::string::npos);
    }
  };
  ProgressOptions o = options();
  const bool first = world_rank() == 0, last = world_rank() == world_size() - 1;
  if (first) o.idle.sleep_s = std::numeric_limits<double>::quiet_NaN();
  fails_with(o, first, "options.idle");
  o = options();
  if (last) o.idle.spin_iterations = -1;
  fails_with(o, last, "options.idle");
  o = options();
  o.compute_threads = -2;
  fails_with(o, true, "options.compute_threads");
}

TEST_CASE("exchanges complete while busy threads occupy every core", "[comm][contention]") {
  const int P = world_size();
  const std::size_t k = 64;
  std::vector<SparsePair> send(k), recv(k * static_cast<std::size_t>(P));
  const std::vector<omgs::GroupBuffers> groups = {{send.data(), recv.data(), k}};
  ProgressOptions o = options();
  o.compute_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProgressEngine e(MPI_COMM_WORLD, groups, o);
  // One spinning thread per hardware thread in every rank: nothing is idle.
  BusyThreads busy(std::max(1u, std::thread::hardware_concurrency()));
  long bad = 0;
  for (int it = 0; it < 50; ++it) {
    for (std::size_t i = 0; i < k; ++i)
      send[i] = {static_cast<std::uint32_t>(world_rank() * 100000 + it * 100 + static_cast<int>(i)),
                 static_cast<float>(it)};
    REQUIRE(e.submit(0) == omgs::SubmitStatus::ok);
    REQUIRE(e.wait(0) == omgs::WaitStatus::ok);
    for (int r = 0; r < P; ++r)
      for (std::size_t i = 0; i < k; ++i) {
        const SparsePair& p = recv[static_cast<std::size_t>(r) * k + i];
        if (p.index != static_cast<std::uint32_t>(r * 100000 + it * 100 + static_cast<int>(i)) ||
            p.value != static_cast<float>(it))
          ++bad;
      }
  }
  CHECK(bad == 0);
}
