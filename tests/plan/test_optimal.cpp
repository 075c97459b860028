// The optimal planner: exact where its fronts stay small, a proven gap where they are
// thinned, and an MGS fallback past its work budget (docs/reliability.md).
#include <fstream>
#include <random>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "test_support.hpp"

using omgs::Planner;
using omgs::PlanStatus;

TEST_CASE("optimal: dynamic programming equals exhaustive search", "[plan][planners][optimal]") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::size_t> len(1, 12);
  for (int trial = 0; trial < 400; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, trial < 5 ? 16 : len(rng));
    const omgs::PlanConfig config{workers, trial % 2 ? 0.01 : 0.001, 8192};
    const omgs::OptimalResult r = omgs::search_optimal(layers, *model, config);
    const double dp = omgs::predict(layers, r.groups, *model, config).iteration_end_s;
    const double brute =
        omgs::predict(layers, omgs::groups_optimal_exhaustive(layers, *model, config), *model,
                      config)
            .iteration_end_s;
    INFO("trial " << trial << " L=" << layers.size() << " " << r.note);
    REQUIRE(r.status == PlanStatus::complete);
    REQUIRE(r.note.empty());
    REQUIRE(dp == brute);
    for (Planner p : omgs::all_planners())
      REQUIRE(omgs::make_plan(p, layers, *model, config).predicted.iteration_end_s >= dp);
  }
  CHECK_THROWS_AS(omgs::groups_optimal_exhaustive(omgs_test::random_layers(rng, 21),
                                                  omgs::ReferenceModel(), {2, 0.01, 8192}),
                  omgs::Error);
}

TEST_CASE("mgs is never better than optimal on larger models", "[plan][planners][optimal]") {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 30; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, 50 + 10 * trial);
    const omgs::PlanConfig config{workers, 0.001, 8192};
    const double opt =
        omgs::make_plan(Planner::optimal, layers, *model, config).predicted.iteration_end_s;
    for (Planner p : omgs::all_planners())
      REQUIRE(omgs::make_plan(p, layers, *model, config).predicted.iteration_end_s >= opt);
  }
}

TEST_CASE("optimal: thinned fronts stay within the reported gap", "[plan][planners][optimal]") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::size_t> len(6, 14);
  omgs::OptimalBudget budget;
  budget.max_front = 2;
  int approximate = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, len(rng));
    const omgs::PlanConfig config{workers, 0.001, 8192};
    const omgs::Plan plan = omgs::make_plan(Planner::optimal, layers, *model, config, budget);
    const double brute =
        omgs::predict(layers, omgs::groups_optimal_exhaustive(layers, *model, config), *model,
                      config)
            .iteration_end_s;
    const double mgs =
        omgs::make_plan(Planner::mgs, layers, *model, config).predicted.iteration_end_s;
    INFO("trial " << trial << " " << plan.status_note);
    REQUIRE(plan.predicted.iteration_end_s <= mgs);
    if (plan.status == PlanStatus::complete) {
      REQUIRE(plan.predicted.iteration_end_s == brute);
      continue;
    }
    ++approximate;
    REQUIRE(plan.status == PlanStatus::approximate);
    REQUIRE(plan.gap_bound_s >= 0.0);
    REQUIRE(plan.predicted.iteration_end_s - brute <= plan.gap_bound_s + 1e-12 * brute);
    REQUIRE_THAT(plan.status_note, Catch::Contains("thinned to 2 states"));
  }
  CHECK(approximate > 50);
}

TEST_CASE("optimal: past its work budget it falls back to MGS", "[plan][planners][optimal]") {
  std::mt19937_64 rng(5);
  const omgs::ReferenceModel ref;
  const omgs::PlanConfig config{4, 0.001, 8192};
  const auto mgs_groups = [&](const std::vector<omgs::LayerSpec>& layers) {
    return omgs::make_plan(Planner::mgs, layers, ref, config).groups.size();
  };
  // Too many layers: decided before searching.
  const auto many = omgs_test::random_layers(rng, 100000);
  const omgs::Plan big = omgs::make_plan(Planner::optimal, many, ref, config);
  CHECK(big.status == PlanStatus::fallback);
  CHECK(big.gap_bound_s == -1.0);
  CHECK_THAT(big.status_note, Catch::Contains("100000 layers need 5e+09 model evaluations"));
  CHECK(big.groups.size() == mgs_groups(many));
  // A budget too small for fronts of 2 states; just enough gives an answer.
  const auto layers = omgs_test::random_layers(rng, 60);
  omgs::OptimalBudget budget;
  budget.max_work = 3 * (60 * 61 / 2) - 1;
  const omgs::Plan skipped = omgs::make_plan(Planner::optimal, layers, ref, config, budget);
  CHECK(skipped.status == PlanStatus::fallback);
  CHECK_THAT(skipped.status_note,
             Catch::Contains("over the budget (max_work 5.49e+03, max_states 2.1e+06)"));
  CHECK(skipped.groups.size() == mgs_groups(layers));
  budget.max_work += 1;
  CHECK(omgs::make_plan(Planner::optimal, layers, ref, config, budget).status !=
        PlanStatus::fallback);
  // Memory: fronts of 2 states for 60 layers need 3 * 61 * 2 states.
  budget.max_work = 30'000'000;
  budget.max_states = 3 * 61 * 2 - 1;
  CHECK(omgs::make_plan(Planner::optimal, layers, ref, config, budget).status ==
        PlanStatus::fallback);
  CHECK(omgs::to_string(PlanStatus::fallback) == "fallback");
}

TEST_CASE("optimal: ResNet-50 repeated 4x under the reference model is bounded",
          "[plan][planners][optimal]") {
  // 644 layers took 81 s before the budget; now a thinned search with a small proven gap.
  const auto resnet = omgs::load_model_csv(OMGS_SOURCE_DIR "/examples/models/resnet50.csv");
  std::vector<omgs::LayerSpec> layers;
  for (int copy = 0; copy < 4; ++copy)
    for (omgs::LayerSpec l : resnet) {
      l.name += "." + std::to_string(copy);
      layers.push_back(l);
    }
  const omgs::ReferenceModel ref;
  const omgs::PlanConfig config{4, 0.001, 8192};
  const omgs::Plan plan = omgs::make_plan(Planner::optimal, layers, ref, config);
  const double end = plan.predicted.iteration_end_s;
  CHECK(plan.status != PlanStatus::fallback);
  CHECK(plan.gap_bound_s < 0.01 * end);
  CHECK(end <= omgs::make_plan(Planner::mgs, layers, ref, config).predicted.iteration_end_s);
}
