#include <algorithm>
#include <random>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "seed_oracle.hpp"
#include "test_support.hpp"

using omgs::Group;
using omgs::LayerSpec;
using omgs::Planner;

namespace {

std::vector<std::vector<std::size_t>> as_index_lists(const std::vector<Group>& groups) {
  std::vector<std::vector<std::size_t>> out;
  for (const Group& g : groups) {
    std::vector<std::size_t> ids;
    for (std::size_t l = g.end; l-- > g.begin;) ids.push_back(l);
    out.push_back(ids);
  }
  return out;
}

void check_invariants(const omgs::Plan& plan, const std::vector<LayerSpec>& layers) {
  const std::size_t L = layers.size();
  REQUIRE(!plan.groups.empty());
  REQUIRE(plan.group_of_layer.size() == L);
  std::vector<int> seen(L, 0);
  std::size_t expected_end = L;
  double prev_topk_end = 0.0, prev_comm_end = 0.0;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& gr = plan.groups[g];
    REQUIRE(gr.end == expected_end);
    REQUIRE(gr.begin < gr.end);
    std::uint64_t numel = 0;
    for (std::size_t l = gr.begin; l < gr.end; ++l) {
      ++seen[l];
      numel += layers[l].numel;
      REQUIRE(plan.group_of_layer[l] == g);
    }
    REQUIRE(gr.numel == numel);
    expected_end = gr.begin;
    const omgs::GroupTiming& t = plan.predicted.groups[g];
    REQUIRE(t.backward_start_s == prev_topk_end);
    REQUIRE(t.backward_start_s <= t.topk_start_s);
    REQUIRE(t.topk_start_s <= t.topk_end_s);
    REQUIRE(t.topk_end_s <= t.comm_start_s);
    REQUIRE(prev_comm_end <= t.comm_start_s);
    REQUIRE(t.comm_start_s <= t.comm_end_s);
    prev_topk_end = t.topk_end_s;
    prev_comm_end = t.comm_end_s;
  }
  REQUIRE(expected_end == 0);
  for (std::size_t l = 0; l < L; ++l) REQUIRE(seen[l] == 1);
  REQUIRE(plan.predicted.iteration_end_s == prev_comm_end);
  REQUIRE(plan.predicted.compute_end_s == prev_topk_end);
  REQUIRE(plan.predicted.non_overlapped_comm_s >= 0.0);
}

}  // namespace

TEST_CASE("planner names", "[plan][planners]") {
  for (Planner p : omgs::all_planners()) CHECK(omgs::parse_planner(omgs::to_string(p)) == p);
  CHECK_THROWS_WITH(omgs::parse_planner("greedy"), Catch::Contains("unknown planner 'greedy'"));
}

TEST_CASE("mgs quirks: one layer, two layers, L-1 and L-2 always together", "[plan][planners]") {
  const omgs_test::LinearModel model(0.25, 1.0, 0.5);
  const omgs::PlanConfig config{4, 0.01, 8192};
  // L = 1: one group holding the layer once (the seed would list it twice).
  auto one = omgs::groups_mgs({{"only", 10, 1.0}}, model, config);
  REQUIRE(one.size() == 1);
  CHECK(one[0].begin == 0);
  CHECK(one[0].end == 1);
  CHECK(omgs_test::seed_mgs({{"only", 10, 1.0}}, model, 4, 0.01) ==
        std::vector<std::vector<std::size_t>>{{0, 0}});
  // L = 2: one group.
  CHECK(as_index_lists(omgs::groups_mgs({{"a", 1, 1.0}, {"b", 1, 1.0}}, model, config)) ==
        std::vector<std::vector<std::size_t>>{{1, 0}});
  // A model under which merging never pays (no start-up cost, huge top-k cost of merged
  // groups): layerwise everywhere except L-1 with L-2.
  omgs::AlphaBetaModel never(omgs::TopkForm::nlogn, 0.0, 1.0, {{4, {0.0, 1e-9}}});
  std::vector<LayerSpec> five;
  for (int i = 0; i < 5; ++i) five.push_back({"l" + std::to_string(i), 1000, 1e-3});
  CHECK(as_index_lists(omgs::groups_mgs(five, never, config)) ==
        std::vector<std::vector<std::size_t>>{{4, 3}, {2}, {1}, {0}});
}

TEST_CASE("mgs on the hand-computed three-layer model", "[plan][planners]") {
  const std::vector<LayerSpec> layers = {{"L0", 2, 1.0}, {"L1", 1, 2.0}, {"L2", 4, 0.5}};
  const omgs::PlanConfig config{4, 0.01, 8192};
  // With a 1 s start-up, merging L1 into L0 waits 0.25 s to save 1 s: one group.
  const omgs_test::LinearModel costly_startup(0.25, 1.0, 0.5);
  CHECK(as_index_lists(omgs::groups_mgs(layers, costly_startup, config)) ==
        std::vector<std::vector<std::size_t>>{{2, 1, 0}});
  // Without start-up cost nothing is saved: L0 stays alone.
  const omgs_test::LinearModel no_startup(0.25, 0.0, 0.5);
  CHECK(as_index_lists(omgs::groups_mgs(layers, no_startup, config)) ==
        std::vector<std::vector<std::size_t>>{{2, 1}, {0}});
}

TEST_CASE("mgs gives the seed's groups on random models", "[plan][planners][seed]") {
  std::mt19937_64 rng(20200706);
  const double densities[] = {0.001, 0.01, 0.05, 1.0};
  std::uniform_int_distribution<std::size_t> len(1, 60);
  for (int trial = 0; trial < 2000; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_model(rng, workers);
    const double density = densities[trial % 4];
    const auto layers = omgs_test::random_layers(rng, trial < 10 ? 300 + 300 * trial : len(rng));
    const omgs::PlanConfig config{workers, density, 8192};
    auto expected = omgs_test::seed_mgs(layers, *model, workers, density);
    if (layers.size() == 1) expected = {{0}};
    INFO("trial " << trial << " L=" << layers.size() << " P=" << workers << " d=" << density);
    REQUIRE(as_index_lists(omgs::groups_mgs(layers, *model, config)) == expected);
  }
}

TEST_CASE("every planner yields a consistent plan on random models", "[plan][planners]") {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::size_t> len(1, 40);
  for (int trial = 0; trial < 300; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, len(rng));
    const omgs::PlanConfig config{workers, 0.01, 1 + static_cast<std::uint64_t>(trial) * 5000};
    for (Planner p : omgs::all_planners()) {
      INFO("trial " << trial << " planner " << omgs::to_string(p));
      const omgs::Plan plan = omgs::make_plan(p, layers, *model, config);
      CHECK(plan.planner == p);
      check_invariants(plan, layers);
    }
  }
}

TEST_CASE("layerwise, single and threshold groupings", "[plan][planners]") {
  const std::vector<LayerSpec> layers = {
      {"a", 9000, 0.0}, {"b", 100, 0.0}, {"c", 5000, 0.0}, {"d", 5000, 0.0}, {"e", 10, 0.0}};
  CHECK(as_index_lists(omgs::groups_layerwise(layers)) ==
        std::vector<std::vector<std::size_t>>{{4}, {3}, {2}, {1}, {0}});
  CHECK(as_index_lists(omgs::groups_single(layers)) ==
        std::vector<std::vector<std::size_t>>{{4, 3, 2, 1, 0}});
  // Backward: e(10)+d(5000)+c(5000) reaches 8192 at c; b(100)+a(9000) at a.
  CHECK(as_index_lists(omgs::groups_threshold(layers, 8192)) ==
        std::vector<std::vector<std::size_t>>{{4, 3, 2}, {1, 0}});
  // A tail that never reaches the threshold still forms a group.
  CHECK(as_index_lists(omgs::groups_threshold(layers, 100000)) ==
        std::vector<std::vector<std::size_t>>{{4, 3, 2, 1, 0}});
  CHECK(as_index_lists(omgs::groups_threshold(layers, 1)) ==
        as_index_lists(omgs::groups_layerwise(layers)));
}

TEST_CASE("make_plan validates its inputs", "[plan][planners]") {
  const std::vector<LayerSpec> layers = {{"a", 10, 1e-3}, {"b", 20, 1e-3}};
  const omgs::ReferenceModel ref;
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, layers, ref, {4, 0.0, 8192}),
                    Catch::Contains("density"));
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, layers, ref, {0, 0.01, 8192}),
                    Catch::Contains("workers = 0"));
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, layers, ref, {3, 0.01, 8192}),
                    Catch::Contains("not P = 3"));
  CHECK_THROWS_WITH(omgs::make_plan(Planner::threshold, layers, ref, {4, 0.01, 0}),
                    Catch::Contains("threshold_numel"));
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, {{"a", 0, 0.0}}, ref, {4, 0.01, 8192}),
                    Catch::Contains("numel 0"));
}
