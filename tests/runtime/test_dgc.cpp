// Accuracy at low density (docs/api.md): the warm-up density schedule, set_density(), momentum
// correction with momentum factor masking and local gradient clipping, under MPI (1, 2 and
// 4 ranks). Conservation is checked in the form each one states: the sum over ranks of what
// entered the residuals (the gradients; with momentum the velocities u_t) equals the sum over
// ranks of what was sent (P times the aggregated updates) plus what the residuals hold.
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "count_allocations.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"
#include "sparse_options.hpp"

using omgs_test::fill_gradient;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> dgc_layers() {
  return {{"conv1", 2000, 1e-4},
          {"conv2", 4000, 2e-4},
          {"fc.weight", 900, 5e-5},
          {"fc.bias", 10, 1e-6}};
}

omgs::RuntimeOptions dgc_options() {
  omgs::RuntimeOptions o = omgs_test::sparse_options();
  o.density = 0.01;
  o.perf_model = "calibrate";
  o.read_environment = false;
  return o;
}

/// What entered the residuals and what was applied, per layer, summed over iterations.
struct Ledger {
  std::vector<std::vector<double>> entered, applied;
  explicit Ledger(const omgs::Runtime& rt) {
    for (const auto& l : rt.layers()) {
      entered.emplace_back(l.numel, 0.0);
      applied.emplace_back(l.numel, 0.0);
    }
  }
  void add_applied(const omgs::Runtime& rt) {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto a = to_host(rt.aggregated(l));
      for (std::size_t i = 0; i < a.size(); ++i)
        applied[l][i] += static_cast<double>(a[i]) * rt.size();
    }
  }
  /// sum over ranks of entered == P * applied + sum over ranks of the residuals.
  void check(const omgs::Runtime& rt, double margin) const {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto r = to_host(rt.residual(l));
      std::vector<double> local(r.begin(), r.end()), resid(r.size()), in(r.size());
      const int n = static_cast<int>(r.size());
      MPI_Allreduce(local.data(), resid.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(entered[l].data(), in.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      for (std::size_t i = 0; i < r.size(); ++i)
        REQUIRE(resid[i] + applied[l][i] == Approx(in[i]).margin(margin));
    }
  }
};

/// One iteration of random gradients (seeded per rank); their values go to the ledger.
void plain_iteration(omgs::Runtime& rt, std::mt19937& rng, Ledger& led) {
  std::vector<float> g;
  for (std::size_t l = rt.num_layers(); l-- > 0;) {
    fill_gradient(rt, l, rng, g);
    for (std::size_t i = 0; i < g.size(); ++i) led.entered[l][i] += g[i];
    REQUIRE(rt.ready(l) == omgs::Status::ok);
  }
  REQUIRE(rt.finish().status == omgs::Status::ok);
  led.add_applied(rt);
}

double expected_warmup(double d0, double d, int iteration, int iterations, int stages) {
  if (iteration >= iterations) return d;
  const int stage = iteration * stages / iterations;
  return d0 * std::pow(d / d0, static_cast<double>(stage) / stages);
}

}  // namespace

TEST_CASE("dgc: the warm-up lowers the density exponentially in stages, losing no mass",
          "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.warmup_density = 0.2;
  opt.warmup_iterations = 8;
  opt.warmup_stages = 4;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  Ledger led(rt);
  std::mt19937 rng(11 + world_rank());
  std::uint32_t generation = rt.last_stats().plan_generation;
  for (int it = 0; it < 11; ++it) {
    const double want = expected_warmup(0.2, 0.01, it, 8, 4);
    REQUIRE(rt.density() == Approx(want).epsilon(1e-12));
    for (std::size_t g = 0; g < rt.plan().groups.size(); ++g)
      REQUIRE(rt.group_k(g) == omgs::selected_count(rt.plan().groups[g].numel, want));
    plain_iteration(rt, rng, led);
    const bool stage_ends = expected_warmup(0.2, 0.01, it + 1, 8, 4) != want;
    CHECK(rt.last_stats().replanned == stage_ends);
    CHECK(rt.last_stats().plan_generation == generation + (stage_ends ? 1u : 0u));
    generation = rt.last_stats().plan_generation;
  }
  CHECK(rt.density() == 0.01);
  led.check(rt, 1e-3);
}

TEST_CASE("dgc: set_density between iterations keeps the residuals and loses no mass",
          "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  // Without the closed loop, so that the engine counts only set_density's plan changes.
  opt.refit_iterations = 0;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  Ledger led(rt);
  std::mt19937 rng(23 + world_rank());
  for (int it = 0; it < 5; ++it) plain_iteration(rt, rng, led);
  std::vector<std::vector<float>> before;
  for (std::size_t l = 0; l < rt.num_layers(); ++l) before.push_back(to_host(rt.residual(l)));
  // The new density's plan may group the layers differently: all groups' pairs compared.
  const auto total_k = [&rt] {
    std::size_t k = 0;
    for (std::size_t g = 0; g < rt.plan().groups.size(); ++g) k += rt.group_k(g);
    return k;
  };
  const std::size_t k_before = total_k();
  const omgs::ProgressStats engine_before = rt.progress_stats();
  CHECK(engine_before.group_sets == 1);
  rt.set_density(0.05);
  CHECK(rt.density() == 0.05);
  // The engine in force took the new groups: its thread, pin and communicators stay.
  CHECK(rt.progress_stats().group_sets == 2);
  CHECK(rt.progress_stats().pinned_pu == engine_before.pinned_pu);
  CHECK(rt.progress_stats().mode == engine_before.mode);
  CHECK(total_k() > k_before);
  for (std::size_t l = 0; l < rt.num_layers(); ++l) REQUIRE(to_host(rt.residual(l)) == before[l]);
  for (int it = 0; it < 5; ++it) plain_iteration(rt, rng, led);
  led.check(rt, 1e-3);
  rt.set_density(0.001);  // and down again
  CHECK(rt.progress_stats().group_sets == 3);
  for (int it = 0; it < 3; ++it) plain_iteration(rt, rng, led);
  led.check(rt, 1e-3);
}

TEST_CASE("dgc: a density change starts a new window of the closed loop", "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.refit_iterations = 4;
  opt.max_replans = 100;
  opt.replan_min_gain = 0.0;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  Ledger led(rt);
  std::mt19937 rng(71 + world_rank());
  for (int it = 0; it < 2; ++it) {
    plain_iteration(rt, rng, led);
    REQUIRE_FALSE(rt.last_stats().refitted);
  }
  rt.set_density(0.03);
  for (int it = 0; it < 4; ++it) {  // 2 + 4 iterations: a full window only after the change
    plain_iteration(rt, rng, led);
    REQUIRE(rt.last_stats().refitted == (it == 3));
  }
  CHECK(rt.last_refit().iteration == 5);  // after the 6th iteration, 4 after the change
  led.check(rt, 1e-3);
}

TEST_CASE("dgc: set_density errors reach every rank and leave the runtime usable",
          "[runtime][dgc]") {
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), dgc_options());
  Ledger led(rt);
  std::mt19937 rng(5 + world_rank());
  CHECK_THROWS_WITH(rt.set_density(1.5), Catch::Contains("outside (0, 1]"));
  if (world_size() > 1)
    CHECK_THROWS_WITH(rt.set_density(world_rank() == 1 ? 0.02 : 0.03),
                      Catch::Contains("disagree on the density"));
  // Rank 0 within an iteration: every rank refuses.
  const std::size_t last = rt.num_layers() - 1;
  std::vector<float> g;
  if (world_rank() == 0) {
    fill_gradient(rt, last, rng, g);
    for (std::size_t i = 0; i < g.size(); ++i) led.entered[last][i] += g[i];
    REQUIRE(rt.ready(last) == omgs::Status::ok);
  }
  CHECK_THROWS_AS(rt.set_density(0.02), omgs::Error);
  for (std::size_t l = rt.num_layers(); l-- > 0;) {
    if (world_rank() == 0 && l == last) continue;
    fill_gradient(rt, l, rng, g);
    for (std::size_t i = 0; i < g.size(); ++i) led.entered[l][i] += g[i];
    REQUIRE(rt.ready(l) == omgs::Status::ok);
  }
  REQUIRE(rt.finish().status == omgs::Status::ok);
  led.add_applied(rt);
  CHECK(rt.density() == 0.01);
  plain_iteration(rt, rng, led);
  led.check(rt, 1e-3);
}

TEST_CASE("dgc: momentum correction accumulates velocities and masks the sent entries",
          "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.momentum = 0.9;
  opt.density = 0.02;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  const std::size_t L = rt.num_layers();
  Ledger led(rt);
  std::mt19937 rng(31 + world_rank());
  std::vector<std::vector<float>> u(L), g(L);
  for (std::size_t l = 0; l < L; ++l) u[l] = to_host(rt.momentum(l));
  std::size_t masked = 0, carried = 0;
  for (int it = 0; it < 12; ++it) {
    if (it == 6) rt.set_density(0.05);  // the velocities carry over a density change too
    for (std::size_t l = L; l-- > 0;) {
      fill_gradient(rt, l, rng, g[l]);
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    REQUIRE(rt.finish().status == omgs::Status::ok);
    led.add_applied(rt);
    for (std::size_t l = 0; l < L; ++l) {
      const auto r = to_host(rt.residual(l)), un = to_host(rt.momentum(l));
      for (std::size_t i = 0; i < r.size(); ++i) {
        const float ut = 0.9f * u[l][i] + g[l][i];  // this iteration's velocity
        led.entered[l][i] += ut;
        if (r[i] == 0.0f) {  // sent: residual and velocity are both cleared
          REQUIRE(un[i] == 0.0f);
          ++masked;
        } else {
          REQUIRE(un[i] == Approx(ut).margin(1e-5));
          ++carried;
        }
      }
      u[l] = un;
    }
  }
  CHECK(masked > 0);
  CHECK(carried > masked);
  led.check(rt, 2e-3);
}

TEST_CASE("dgc: dense groups send the velocity and keep it (momentum SGD)", "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.momentum = 0.5;
  opt.planner = omgs::Planner::dense;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  std::mt19937 rng(41 + world_rank());
  std::vector<float> g;
  std::vector<std::vector<float>> u(rt.num_layers());
  for (std::size_t l = 0; l < rt.num_layers(); ++l) u[l].assign(rt.layers()[l].numel, 0.0f);
  for (int it = 0; it < 4; ++it) {
    for (std::size_t l = rt.num_layers(); l-- > 0;) {
      fill_gradient(rt, l, rng, g);
      for (std::size_t i = 0; i < g.size(); ++i) u[l][i] = 0.5f * u[l][i] + g[i];
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    REQUIRE(rt.finish().status == omgs::Status::ok);
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto a = to_host(rt.aggregated(l)), un = to_host(rt.momentum(l));
      std::vector<double> mine(u[l].begin(), u[l].end()), sum(u[l].size());
      MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM,
                    MPI_COMM_WORLD);
      for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(un[i] == Approx(u[l][i]).margin(1e-5));
        REQUIRE(a[i] == Approx(sum[i] / world_size()).margin(1e-4));
      }
    }
  }
}

TEST_CASE("dgc: clipping scales each layer to clip_norm / sqrt(P)", "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.clip_norm = 4.0;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  const double limit = 4.0 / std::sqrt(static_cast<double>(world_size()));
  Ledger led(rt);
  std::mt19937 rng(53 + world_rank());
  std::vector<std::vector<float>> g(rt.num_layers());
  std::vector<double> scale(rt.num_layers());
  for (int it = 0; it < 3; ++it) {
    for (std::size_t l = rt.num_layers(); l-- > 0;) {
      fill_gradient(rt, l, rng, g[l]);
      if (l == 3) {  // norm 0.03: under every limit, unchanged
        g[l].assign(g[l].size(), 0.01f);
        omgs_test::copy_to(rt.gradient(l), g[l]);
      }
      double norm = 0;
      for (float x : g[l]) norm += static_cast<double>(x) * x;
      norm = std::sqrt(norm);
      scale[l] = norm > limit ? limit / norm : 1.0;
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    REQUIRE(rt.finish().status == omgs::Status::ok);
    led.add_applied(rt);
    CHECK(scale[3] == 1.0);
    CHECK(scale[1] < 1.0);  // conv2: norm about sqrt(4000) = 63
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto clipped = to_host(rt.gradient(l));  // the slot holds what entered
      for (std::size_t i = 0; i < g[l].size(); ++i) {
        REQUIRE(clipped[i] == Approx(g[l][i] * scale[l]).margin(1e-6));
        led.entered[l][i] += clipped[i];
      }
    }
  }
  led.check(rt, 1e-4);
}

TEST_CASE("dgc: bad or differing options are an error on every rank, naming the option",
          "[runtime][dgc]") {
  auto with = [](auto set) {
    omgs::RuntimeOptions o = dgc_options();
    set(o);
    return o;
  };
  const auto layers = dgc_layers();
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, with([](auto& o) { o.momentum = 1.0; })),
                    Catch::Contains("momentum"));
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, with([](auto& o) { o.clip_norm = -1; })),
                    Catch::Contains("clip_norm"));
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, with([](auto& o) {
                                    o.warmup_iterations = 10;
                                    o.warmup_stages = 0;
                                  })),
                    Catch::Contains("warmup_stages"));
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, with([](auto& o) {
                                    o.warmup_iterations = 10;
                                    o.warmup_density = 0.001;
                                  })),
                    Catch::Contains("warmup_density"));
  CHECK_THROWS_AS(omgs::Runtime(MPI_COMM_WORLD, layers, with([](auto& o) { o.momentum = -0.5; })),
                  omgs::Error);
  omgs::Runtime off(MPI_COMM_WORLD, layers, dgc_options());
  CHECK_THROWS_WITH(off.momentum(0), Catch::Contains("momentum correction is off"));
  if (world_size() < 2) return;
  const bool odd = world_rank() == 1;
  const std::vector<std::pair<std::string, omgs::RuntimeOptions>> differing = {
      {"warmup_density", with([&](auto& o) { o.warmup_density = odd ? 0.5 : 0.25; })},
      {"warmup_iterations", with([&](auto& o) { o.warmup_iterations = odd ? 7 : 8; })},
      {"warmup_stages", with([&](auto& o) { o.warmup_stages = odd ? 3 : 4; })},
      {"momentum", with([&](auto& o) { o.momentum = odd ? 0.9 : 0.0; })},
      {"clip_norm", with([&](auto& o) { o.clip_norm = odd ? 1.0 : 2.0; })},
  };
  for (const auto& [name, o] : differing)
    CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, o),
                      Catch::Contains("disagree on the option " + name));
}

TEST_CASE("dgc: momentum correction and clipping allocate nothing per iteration",
          "[runtime][dgc]") {
  omgs::RuntimeOptions opt = dgc_options();
  opt.momentum = 0.9;
  opt.clip_norm = 1.0;
  // The closed loop's refits allocate (a bounded number; after it settles nothing does:
  // tests/soak); this counts the iterations of momentum and clipping alone.
  opt.refit_iterations = 0;
  omgs::Runtime rt(MPI_COMM_WORLD, dgc_layers(), opt);
  std::mt19937 rng(61 + world_rank());
  std::vector<std::vector<float>> g(rt.num_layers());
  long allocations = 0;
  for (int it = 0; it < 8; ++it) {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) fill_gradient(rt, l, rng, g[l]);
    omgs_test::allocations.store(0);
    omgs_test::count_allocations.store(it >= 3);  // after one-time initializations
    for (std::size_t l = rt.num_layers(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
    const omgs::Status s = rt.finish().status;
    omgs_test::count_allocations.store(false);
    allocations += omgs_test::allocations.load();
    REQUIRE(s == omgs::Status::ok);
  }
#ifndef OMGS_TEST_UNDER_ASAN
  CHECK(allocations == 0);
#endif
}
