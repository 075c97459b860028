// The runtime's registry of group exchanges (src/runtime/group_exchange.cpp): a plan's
// groups get the exchange registered for their Collective, a collective nothing registered
// is refused naming its group, and the trace names each group's exchange by its collective.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>
#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime_test_support.hpp"

using omgs_test::count_of;
using omgs_test::fill_gradient;
using omgs_test::read_file;
using omgs_test::world_rank;

namespace {

std::vector<omgs::LayerSpec> timed_layers() {
  return {{"a", 3000, 1e-4}, {"b", 700, 1e-4}, {"c", 40, 1e-4}, {"d", 5000, 1e-4}};
}

omgs::IterationStats iterate(omgs::Runtime& rt, std::mt19937& rng) {
  std::vector<float> g;
  for (std::size_t l = rt.num_layers(); l-- > 0;) {
    fill_gradient(rt, l, rng, g);
    REQUIRE(rt.ready(l) == omgs::Status::ok);
  }
  return rt.finish();
}

}  // namespace

TEST_CASE("a plan's groups get the exchange registered for their collective",
          "[runtime][registry]") {
  using namespace omgs::detail;
  static std::atomic<int> made{0}, sized{0};
  made = 0;
  sized = 0;
  register_exchange(
      omgs::Collective::sparse,
      [](GroupSlice slice, double density, ExchangeContext& ctx) {
        ++made;
        return make_allgather_exchange(std::move(slice), density, ctx);
      },
      [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks,
         const omgs::detail::WireFormats& formats) {
        ++sized;
        return allgather_footprint(n, k, ranks, formats.pair);
      });
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = omgs::Planner::layerwise;
  opt.refit_iterations = 0;  // one plan instance: its groups' exchanges made once
  opt.read_environment = false;
  std::size_t groups = 0;
  {
    omgs::Runtime rt(MPI_COMM_WORLD, timed_layers(), opt);
    groups = rt.plan().groups.size();
    std::mt19937 rng(3);
    CHECK(iterate(rt, rng).status == omgs::Status::ok);
  }
  register_exchange(  // the built-in one back
      omgs::Collective::sparse, make_allgather_exchange,
      [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats& formats) {
        return allgather_footprint(n, k, ranks, formats.pair);
      });
  CHECK(made == static_cast<int>(groups));
  CHECK(sized >= static_cast<int>(groups));  // the size check before allocating
}

TEST_CASE("a collective nothing registered is refused, naming its group", "[runtime][registry]") {
  using namespace omgs::detail;
  const auto unknown = static_cast<omgs::Collective>(99);
  ExchangeContext ctx;
  CHECK_THROWS_WITH(make_exchange(unknown, GroupSlice{0, 0, 10, "group 0 (layer 'x')"}, 0.1, ctx),
                    Catch::Contains("group 0 (layer 'x') has an unknown collective (99)"));
  CHECK(exchange_footprint(unknown, 10, 1, 2, WireFormats{}) == 0);
}

TEST_CASE("each group's exchange event in the trace is named by its collective",
          "[runtime][trace]") {
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = omgs::Planner::layerwise;
  opt.refit_iterations = 0;  // one plan instance: its groups' exchanges made once
  opt.read_environment = false;
  opt.sparse_exchange = omgs::SparseExchange::allreduce;
  opt.trace_path = "omgs_test_registry_trace.%r.json";
  const std::string path = "omgs_test_registry_trace." + std::to_string(world_rank()) + ".json";
  std::size_t groups = 0;
  {
    omgs::Runtime rt(MPI_COMM_WORLD, timed_layers(), opt);
    groups = rt.plan().groups.size();
    std::mt19937 rng(5);
    for (int it = 0; it < 2; ++it) REQUIRE(iterate(rt, rng).status == omgs::Status::ok);
  }
  const std::string text = read_file(path);
  CHECK(count_of(text, "\"name\": \"sparse allreduce g") == 2 * 2 * groups);  // b + e events
  CHECK(count_of(text, "\"name\": \"allgather g") == 0);
  std::remove(path.c_str());
}

TEST_CASE("a collective's footprint counts the formats in force", "[runtime][registry]") {
  using omgs::detail::exchange_footprint;
  const std::uint64_t n = 10000, k = 10, P = 4;
  const omgs::detail::WireFormats fp32{omgs::PairWire::pairs8, omgs::DenseWire::fp32};
  const omgs::detail::WireFormats bf16{omgs::PairWire::pairs8, omgs::DenseWire::bf16};
  const omgs::detail::WireFormats compact{omgs::PairWire::bf16, omgs::DenseWire::fp32};
  // A 16-bit dense group: its 16-bit send, receive and error buffers and the wire's host
  // shards, two 8-byte items an element more.
  CHECK(exchange_footprint(omgs::Collective::dense, n, k, P, bf16) ==
        exchange_footprint(omgs::Collective::dense, n, k, P, fp32) + 2 * n);
  // The pair groups read the pair wire, not the dense one.
  CHECK(exchange_footprint(omgs::Collective::sparse, n, k, P, bf16) ==
        exchange_footprint(omgs::Collective::sparse, n, k, P, fp32));
  CHECK(exchange_footprint(omgs::Collective::sparse, n, k, P, compact) ==
        omgs::detail::allgather_footprint(n, k, P, omgs::PairWire::bf16));
  CHECK(exchange_footprint(static_cast<omgs::Collective>(240), n, k, P, fp32) == 0);
}

TEST_CASE(
    "the sparse allreduce's footprint is the planner row's memory, the engine's room "
    "the same at any P",
    "[runtime][registry]") {
  using omgs::detail::exchange_footprint;
  const omgs::detail::WireFormats fp32{omgs::PairWire::pairs8, omgs::DenseWire::fp32};
  for (const std::uint64_t n : {1000ull, 100000ull, 6738415616ull}) {
    for (const int p : {1, 2, 3, 4, 8, 64, 4096}) {
      CAPTURE(n, p);
      const double d = 0.001;
      const std::uint64_t k = omgs::selected_count(n, d);
      omgs::Plan plan;
      plan.groups = {{0, 1, n, omgs::Collective::sparse_allreduce}};
      // The planner's row repeats the engine's room formula (no MPI in the plan module).
      CHECK(8.0 * static_cast<double>(exchange_footprint(omgs::Collective::sparse_allreduce, n, k,
                                                         static_cast<std::uint64_t>(p), fp32)) ==
            omgs::group_memory_bytes(plan, p, d)[0]);
      // The engine's part: 23 k items (+1: k = 1's window) and its S = min(n, k + P - 1)
      // survivors (twice where S passes the received scratch's 5 k), none of it P k.
      const auto P = static_cast<std::uint64_t>(p);
      const std::uint64_t s = omgs::detail::sparse_allreduce::max_survivors(n, k, P);
      CHECK(s == std::min(n, k + P - 1));
      const std::uint64_t room =
          omgs::detail::SparseAllreduce::room_items(n, k, p, omgs::PairWire::pairs8);
      CHECK(room <= 23 * k + 8 + 2 * s);
      if (n / P >= 4 * k && s <= 5 * k) CHECK(room == 23 * k + s);
      // Per-rank memory grows with P by a few items a rank, not by k a rank as P k survivors
      // did: the survivors' bound in three buffers (the runtime's, the exchange's, its sort
      // scratch); with the compact format also the dropped buffer and 12 words of block
      // headers and counts a peer (steps 1 and 3).
      for (const auto wire : {omgs::PairWire::pairs8, omgs::PairWire::bf16}) {
        const omgs::detail::WireFormats f{wire, omgs::DenseWire::fp32};
        const auto at = [&](std::uint64_t ranks) {
          return exchange_footprint(omgs::Collective::sparse_allreduce, n, k, ranks, f);
        };
        CHECK(at(P) <= at(1) + (wire == omgs::PairWire::pairs8 ? 3 : 10) * (P - 1));
      }
    }
  }
}
