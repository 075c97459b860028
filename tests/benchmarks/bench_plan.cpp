// omgs-bench-plan: time to plan L tensors with MGS (incremental, O(L)) next to the seed's
// O(L^2) form transcribed literally (tests/plan/seed_oracle.hpp), and the optimal DP.
// Usage: omgs-bench-plan [--max-layers N]   (default 100000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#include "seed_oracle.hpp"
#include "test_support.hpp"

namespace {
template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Optimal planner: time, status and groups for L layers under one model.
void optimal_rows(const char* name, const omgs::PerfModel& model, const omgs::PlanConfig& config,
                  std::size_t max_layers) {
  std::mt19937_64 rng(2);
  for (std::size_t L = 100; L <= max_layers; L *= 10) {
    const auto layers = omgs_test::random_layers(rng, L);
    omgs::Plan plan;
    const double t = median_seconds(L >= 10000 ? 1 : 3, [&] {
      plan = omgs::make_plan(omgs::Planner::optimal, layers, model, config);
    });
    const double mgs =
        omgs::make_plan(omgs::Planner::mgs, layers, model, config).predicted.iteration_end_s;
    std::printf("%-10s  %8zu  %12.3f  %-11s  %10.3g  %14.6f  %8zu\n", name, L, t * 1e3,
                std::string(omgs::to_string(plan.status)).c_str(), plan.gap_bound_s,
                plan.predicted.iteration_end_s / mgs, plan.groups.size());
  }
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t max_layers = 100000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--max-layers") == 0)
      max_layers = std::strtoull(argv[i + 1], nullptr, 10);
  const omgs::ReferenceModel model;
  const omgs::PlanConfig config{16, 0.001, 8192};
  std::mt19937_64 rng(1);
  std::printf("MGS planning time, reference model, P = 16, density 0.001 (median of runs)\n");
  std::printf("%8s  %14s  %16s  %8s  %8s\n", "L", "omgs mgs [ms]", "seed O(L^2) [ms]", "speedup",
              "groups");
  for (std::size_t L = 100; L <= max_layers; L *= 10) {
    const auto layers = omgs_test::random_layers(rng, L);
    std::size_t groups = 0;
    const double fast = median_seconds(L >= 100000 ? 5 : 11, [&] {
      groups = omgs::make_plan(omgs::Planner::mgs, layers, model, config).groups.size();
    });
    double seed = -1.0;
    if (L <= 10000)
      seed = median_seconds(L >= 10000 ? 1 : 3, [&] {
        (void)omgs_test::seed_mgs(layers, model, config.workers, config.density);
      });
    std::printf("%8zu  %14.3f  ", L, fast * 1e3);
    if (seed >= 0)
      std::printf("%16.3f  %7.1fx  ", seed * 1e3, seed / fast);
    else
      std::printf("%16s  %8s  ", "(skipped)", "");
    std::printf("%8zu\n", groups);
  }
  // The alpha-beta model of the README (P = 4 entry reused for P = 16).
  const omgs::AlphaBetaModel alpha_beta(omgs::TopkForm::linear, 2e-5, 1.2e-9,
                                        {{16, {3.0e-5, 1.2e-10}}});
  std::printf("\nOptimal planner (default budget), P = 16, density 0.001\n");
  std::printf("%-10s  %8s  %12s  %-11s  %10s  %14s  %8s\n", "model", "L", "time [ms]", "status",
              "gap [s]", "end / mgs end", "groups");
  optimal_rows("reference", model, config, max_layers);
  optimal_rows("alpha-beta", alpha_beta, config, max_layers);
  return 0;
}
