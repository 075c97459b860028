// Planner::automatic: every planner's plan, the best predicted kept, deterministically.
#include <map>
#include <random>
#include <vector>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"

TEST_CASE("automatic keeps the lowest predicted plan of every planner", "[plan][automatic]") {
  CHECK(omgs::parse_planner("automatic") == omgs::Planner::automatic);
  CHECK(omgs::to_string(omgs::Planner::automatic) == "automatic");
  std::mt19937 rng(17);
  std::uniform_int_distribution<std::uint64_t> numel(10, 3000000);
  std::uniform_real_distribution<double> bwd(0.0, 2e-3);
  const omgs::AlphaBetaModel slow_net(omgs::TopkForm::linear, 5e-5, 2e-9,
                                      std::map<int, omgs::AlphaBeta>{{4, {5e-3, 1e-8}}});
  const omgs::AlphaBetaModel fast_net(omgs::TopkForm::linear, 5e-4, 2e-9,
                                      std::map<int, omgs::AlphaBeta>{{4, {1e-6, 1e-11}}});
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<omgs::LayerSpec> layers;
    for (int l = 0; l < 12 + trial; ++l)
      layers.push_back({"l" + std::to_string(l), numel(rng), bwd(rng)});
    for (const omgs::PerfModel* m : {static_cast<const omgs::PerfModel*>(&slow_net),
                                     static_cast<const omgs::PerfModel*>(&fast_net)}) {
      // With margin 0 the lowest prediction wins; with the default margin a plan within 10%
      // of it, and none of those has fewer groups.
      const omgs::PlanConfig exact{4, 0.001, 8192, 0.0};
      const omgs::PlanConfig config{4, 0.001, 8192};
      const omgs::Plan a = omgs::make_plan(omgs::Planner::automatic, layers, *m, config);
      const omgs::Plan e = omgs::make_plan(omgs::Planner::automatic, layers, *m, exact);
      CHECK(a.planner != omgs::Planner::automatic);
      CHECK(a.picked == a.planner);
      double best = 1e300;
      for (omgs::Planner p : omgs::all_planners())
        best = std::min(best, omgs::make_plan(p, layers, *m, config).predicted.iteration_end_s);
      CHECK(e.predicted.iteration_end_s == best);
      CHECK(a.predicted.iteration_end_s <= best * (1 + omgs::default_choice_margin));
      CHECK(a.groups.size() <= e.groups.size());
      for (omgs::Planner p : omgs::all_planners()) {
        const omgs::Plan c = omgs::make_plan(p, layers, *m, config);
        if (c.predicted.iteration_end_s <= best * (1 + omgs::default_choice_margin))
          CHECK(a.groups.size() <= c.groups.size());
      }
      // The winner's own plan is the same grouping.
      const omgs::Plan w = omgs::make_plan(a.planner, layers, *m, config);
      REQUIRE(w.groups.size() == a.groups.size());
      for (std::size_t g = 0; g < w.groups.size(); ++g)
        CHECK(w.groups[g].begin == a.groups[g].begin);
    }
  }
}

TEST_CASE("automatic breaks ties toward fewer groups", "[plan][automatic]") {
  // One layer: every planner gives the same single group; with zero costs everything ties.
  const omgs::AlphaBetaModel free_model(omgs::TopkForm::linear, 0.0, 0.0,
                                        std::map<int, omgs::AlphaBeta>{{2, {0.0, 0.0}}});
  const std::vector<omgs::LayerSpec> layers = {{"a", 100, 0.0}, {"b", 100, 0.0}, {"c", 5, 0.0}};
  const omgs::Plan a =
      omgs::make_plan(omgs::Planner::automatic, layers, free_model, omgs::PlanConfig{2, 0.1, 8192});
  CHECK(a.predicted.iteration_end_s == 0.0);
  CHECK(a.groups.size() == 1);
  // mgs keeps two groups (its last two layers always merge, the first stays apart);
  // optimal is the first of automatic_candidates() with one group.
  CHECK(a.planner == omgs::Planner::optimal);
}
