// Communication faults, injected with a PMPI layer (mpi_fault.c) and by stalling ranks:
// transient MPI errors are retried without loss, a rank that stops participating is named
// by the watchdog on every waiting rank (and the iteration resumes when it comes back),
// and a collective that completes in error fails only that rank's group, keeping its
// gradient in the residual.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <omgs/runtime.hpp>

#include "../runtime/runtime_test_support.hpp"
#include "mpi_fault.h"
#include "omgs_catch.hpp"
#include "sparse_options.hpp"

using omgs_test::copy_to;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> layers() {
  return {{"a", 300, 1e-4}, {"b", 1000, 1e-4}, {"c", 17, 1e-4}, {"d", 2000, 1e-4}};
}

// Rank r's gradient of layer l in iteration it: distinct on every rank.
float value(int r, std::size_t l, std::size_t i, int it) {
  return static_cast<float>(r + 1) * 0.25f + static_cast<float>(l) +
         static_cast<float>(i % 7) * 0.01f + static_cast<float>(it) * 0.5f;
}

void write_gradients(omgs::Runtime& rt, int it) {
  for (std::size_t l = 0; l < rt.num_layers(); ++l) {
    std::vector<float> g(rt.layers()[l].numel);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(world_rank(), l, i, it);
    copy_to(rt.gradient(l), g);
  }
}

// With density 1 every entry is sent: the aggregated gradient is the plain mean.
void check_mean(omgs::Runtime& rt, int it) {
  const int P = world_size();
  for (std::size_t l = 0; l < rt.num_layers(); ++l) {
    const auto a = to_host(rt.aggregated(l));
    for (std::size_t i = 0; i < a.size(); i += 13) {
      double mean = 0;
      for (int r = 0; r < P; ++r) mean += value(r, l, i, it);
      mean /= P;
      REQUIRE(a[i] == Approx(mean).epsilon(1e-5));
    }
  }
}

omgs::RuntimeOptions options(omgs::Planner planner) {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 1.0;
  opt.planner = planner;
  opt.perf_model = "calibrate";
  return opt;
}

void ready_all(omgs::Runtime& rt) {
  for (std::size_t l = rt.num_layers(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
}

/// finish() until it stops timing out (at most `tries`); returns the final stats and, in
/// `seen`, the watchdog's diagnosis of every timeout.
omgs::IterationStats finish_retrying(omgs::Runtime& rt, int tries,
                                     std::vector<omgs::Diagnosis>* seen) {
  omgs::IterationStats st;
  for (int i = 0; i < tries; ++i) {
    st = rt.finish();
    if (st.status != omgs::Status::comm_failed || rt.last_diagnosis().group < 0) return st;
    seen->push_back(rt.last_diagnosis());
  }
  return st;
}

/// The diagnosis that names `stalled` alone. On a loaded machine (4 ranks on 2 cores under
/// TSan) the first timeout can come before the healthy ranks have posted too, and later ones
/// may find the stalled rank caught up; while it is stalled, one must name it and nobody
/// else. Every diagnosis that names anyone must name it. Returns nullptr if none isolates it.
const omgs::Diagnosis* isolating(const std::vector<omgs::Diagnosis>& seen, int stalled) {
  const omgs::Diagnosis* found = nullptr;
  for (const auto& d : seen) {
    INFO("diagnosis: " << d.report);
    if (!d.lagging.empty())
      CHECK(std::find(d.lagging.begin(), d.lagging.end(), stalled) != d.lagging.end());
    if (found == nullptr && d.lagging.size() == 1 && d.lagging[0] == stalled) found = &d;
  }
  return found;
}

}  // namespace

TEST_CASE("transient MPI_Iallgatherv failures are retried: nothing lost, errors counted",
          "[faults]") {
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(omgs::Planner::layerwise));
  const bool faulty = world_rank() == world_size() - 1;
  omgs_fault_reset();
  if (faulty) omgs_fault_fail_calls(OMGS_FAULT_IALLGATHERV, 2, 3, MPI_ERR_OTHER);
  for (int it = 0; it < 3; ++it) {
    write_gradients(rt, it);
    ready_all(rt);
    REQUIRE(rt.finish().status == omgs::Status::ok);
    check_mean(rt, it);
  }
  const omgs::ProgressStats ps = rt.progress_stats();
  std::uint64_t post_errors = 0;
  for (const auto& g : ps.groups) post_errors += g.post_errors;
  CHECK(ps.mpi_errors == (faulty ? 3u : 0u));
  CHECK(post_errors == (faulty ? 3u : 0u));
  CHECK(omgs_fault_injected(OMGS_FAULT_IALLGATHERV) == (faulty ? 3 : 0));
  omgs_fault_reset();
}

TEST_CASE("transient MPI_Testsome failures are retried", "[faults]") {
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(omgs::Planner::layerwise));
  omgs_fault_reset();
  omgs_fault_fail_calls(OMGS_FAULT_TESTSOME, 1, 5, MPI_ERR_INTERN);
  for (int it = 0; it < 2; ++it) {
    write_gradients(rt, it);
    ready_all(rt);
    REQUIRE(rt.finish().status == omgs::Status::ok);
    check_mean(rt, it);
  }
  CHECK(omgs_fault_injected(OMGS_FAULT_TESTSOME) == 5);
  CHECK(rt.progress_stats().mpi_errors >= 5);
  omgs_fault_reset();
}

TEST_CASE("variable-count engine: failing count exchanges are retried too", "[faults]") {
  const int P = world_size();
  const std::size_t k = 40;
  std::vector<omgs::SparsePair> send(k), recv(k * static_cast<std::size_t>(P));
  omgs::ProgressOptions po;
  po.variable_counts = true;
  omgs::ProgressEngine engine(MPI_COMM_WORLD, {{send.data(), recv.data(), k}}, po);
  omgs_fault_reset();
  if (world_rank() == 0) omgs_fault_fail_calls(OMGS_FAULT_IALLGATHER, 1, 2, MPI_ERR_OTHER);
  const std::size_t mine = 5 + static_cast<std::size_t>(world_rank());
  for (std::size_t i = 0; i < mine; ++i)
    send[i] = {static_cast<std::uint32_t>(100 * world_rank() + i), 1.0f};
  REQUIRE(engine.submit(0, mine) == omgs::SubmitStatus::ok);
  REQUIRE(engine.wait(0, 60.0) == omgs::WaitStatus::ok);
  for (int r = 0; r < P; ++r) {
    REQUIRE(engine.recv_counts(0)[r] == static_cast<std::uint64_t>(5 + r));
    CHECK(recv[static_cast<std::size_t>(engine.recv_displs(0)[r])].index ==
          static_cast<std::uint32_t>(100 * r));
  }
  CHECK(omgs_fault_injected(OMGS_FAULT_IALLGATHER) == (world_rank() == 0 ? 2 : 0));
  omgs_fault_reset();
}

// The sparse allreduce's steps run on a communicator of their own, advanced beside the
// others: a rank that has not posted it is named the same way.
TEST_CASE("a rank that stops participating is named by the watchdog; finish() resumes",
          "[faults][watchdog]") {
  const int P = world_size();
  using omgs::SparseExchange;
  for (const auto& [inline_slow, exchange] :
       {std::pair{false, SparseExchange::allgather}, std::pair{true, SparseExchange::allgather},
        std::pair{false, SparseExchange::allreduce}}) {
    INFO("slow rank in inline mode: " << inline_slow << ", sparse exchange "
                                      << omgs::to_string(exchange));
    const bool slow = world_rank() == P - 1;
    omgs::RuntimeOptions opt = options(omgs::Planner::layerwise);
    opt.sparse_exchange = exchange;
    opt.wait_timeout_s = 0.3;
    opt.watchdog_query_s = 0.5;
    opt.force_inline_progress = slow && inline_slow;
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    MPI_Barrier(MPI_COMM_WORLD);
    write_gradients(rt, 0);
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // stuck in "compute"
    ready_all(rt);
    std::vector<omgs::Diagnosis> seen;
    const omgs::IterationStats st = finish_retrying(rt, 200, &seen);
    REQUIRE(st.status == omgs::Status::ok);
    check_mean(rt, 0);
    if (!slow) {
      // A timeout named the slow rank, and nobody else.
      CHECK(seen.size() >= 1);
      const omgs::Diagnosis* found = isolating(seen, P - 1);
      REQUIRE(found != nullptr);
      const omgs::Diagnosis& d = *found;
      CHECK(d.group == 0);
      const std::string who = "Ranks that have not posted it: " + std::to_string(P - 1) + " (";
      CHECK(d.report.find(who) != std::string::npos);
      if (inline_slow) {
        CHECK(d.report.find("no answer") != std::string::npos);
        CHECK_FALSE(d.peers[static_cast<std::size_t>(P - 1)].responded);
      } else {
        CHECK(d.report.find("nothing posted yet") != std::string::npos);
        CHECK(d.peers[static_cast<std::size_t>(P - 1)].responded);
        CHECK(d.peers[static_cast<std::size_t>(P - 1)].posted == 0);
      }
      CHECK(rt.last_error().find("call finish() again") != std::string::npos);
    }
    // The next iteration is normal (retried only if a slow machine needs more than 0.3 s).
    write_gradients(rt, 1);
    ready_all(rt);
    std::vector<omgs::Diagnosis> more;
    REQUIRE(finish_retrying(rt, 200, &more).status == omgs::Status::ok);
    check_mean(rt, 1);
  }
}

TEST_CASE("a rank whose posts keep failing is named with its MPI error; recovery after",
          "[faults][watchdog]") {
  const int P = world_size();
  const bool faulty = world_rank() == P - 1;
  omgs::RuntimeOptions opt = options(omgs::Planner::layerwise);
  opt.wait_timeout_s = 0.3;
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  omgs_fault_reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (faulty) omgs_fault_fail_for(OMGS_FAULT_IALLGATHERV, 2.0, MPI_ERR_NO_MEM);
  write_gradients(rt, 0);
  ready_all(rt);
  std::vector<omgs::Diagnosis> seen;
  const omgs::IterationStats st = finish_retrying(rt, 200, &seen);
  REQUIRE(st.status == omgs::Status::ok);
  check_mean(rt, 0);
  CHECK(seen.size() >= 1);
  const omgs::Diagnosis* found = isolating(seen, P - 1);
  REQUIRE(found != nullptr);
  const omgs::Diagnosis& d = *found;
  CHECK(d.peers[static_cast<std::size_t>(P - 1)].post_errors > 0);
  CHECK(d.report.find("MPI error(s) posting") != std::string::npos);
  omgs_fault_reset();
}

TEST_CASE("a collective completed in error fails that rank's group and keeps its gradient",
          "[faults]") {
  const int P = world_size();
  const bool faulty = world_rank() == P - 1;
  // One group: the failing completion is the iteration's only collective, so no other rank
  // is left waiting for this one.
  omgs::RuntimeOptions opt = options(omgs::Planner::single);
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  omgs_fault_reset();
  if (faulty) omgs_fault_error_next_completion(MPI_ERR_TRUNCATE);
  write_gradients(rt, 0);
  ready_all(rt);
  const omgs::IterationStats st = rt.finish();
  if (!faulty) {
    REQUIRE(st.status == omgs::Status::ok);
    check_mean(rt, 0);
  } else {
    REQUIRE(st.status == omgs::Status::comm_failed);
    CHECK(st.failed_group == 0);
    CHECK(rt.last_error().find("completed with an MPI error") != std::string::npos);
    // Nothing lost: this rank's whole gradient is back in its residual; nothing applied.
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto r = to_host(rt.residual(l));
      for (std::size_t i = 0; i < r.size(); ++i) REQUIRE(r[i] == value(world_rank(), l, i, 0));
      for (float a : to_host(rt.aggregated(l))) REQUIRE(a == 0.0f);
    }
    // The engine posts nothing more: the next iteration fails at once instead of matching
    // the wrong collective of the other ranks.
    write_gradients(rt, 1);
    ready_all(rt);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(rt.finish().status == omgs::Status::comm_failed);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
  omgs_fault_reset();
}

TEST_CASE("ready() from a second thread while finish() runs is refused, not corrupting",
          "[faults][threads]") {
  const int P = world_size();
  if (P < 2) return;
  omgs::RuntimeOptions opt = options(omgs::Planner::layerwise);
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  MPI_Barrier(MPI_COMM_WORLD);
  write_gradients(rt, 0);
  if (world_rank() == P - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // keeps finish() waiting
    ready_all(rt);
    REQUIRE(rt.finish().status == omgs::Status::ok);
  } else {
    ready_all(rt);
    omgs::IterationStats st;
    std::thread finisher([&] { st = rt.finish(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(rt.ready(0) == omgs::Status::concurrent_call);
    CHECK(rt.finish().status == omgs::Status::concurrent_call);
    finisher.join();
    REQUIRE(st.status == omgs::Status::ok);
  }
  check_mean(rt, 0);
}
