// omgs-bench-plan: time to plan L tensors with MGS (incremental, O(L)) next to the seed's
// O(L^2) form transcribed literally (tests/plan/seed_oracle.hpp), and the optimal DP.
// Usage: omgs-bench-plan [--max-layers N]   (default 100000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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
  std::printf("%8s  %14s  %16s  %8s  %14s  %8s\n", "L", "omgs mgs [ms]", "seed O(L^2) [ms]",
              "speedup", "optimal [ms]", "groups");
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
    double optimal = -1.0;
    if (L <= 1000)
      optimal = median_seconds(
          1, [&] { (void)omgs::make_plan(omgs::Planner::optimal, layers, model, config); });
    std::printf("%8zu  %14.3f  ", L, fast * 1e3);
    if (seed >= 0)
      std::printf("%16.3f  %7.1fx  ", seed * 1e3, seed / fast);
    else
      std::printf("%16s  %8s  ", "(skipped)", "");
    if (optimal >= 0)
      std::printf("%14.3f  ", optimal * 1e3);
    else
      std::printf("%14s  ", "(skipped)");
    std::printf("%8zu\n", groups);
  }
  return 0;
}
