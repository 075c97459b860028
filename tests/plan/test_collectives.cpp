// Sparse or dense per group (issue #19): the allreduce cost, dense groups in the timeline,
// the optimal search over boundaries and collectives, MGS's extension and the mixed planner.
#include <cmath>
#include <random>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "test_support.hpp"

using omgs::Collective;
using omgs::Planner;

namespace {
double end_of(const std::vector<omgs::LayerSpec>& layers, const std::vector<omgs::Group>& groups,
              const omgs::PerfModel& model, const omgs::PlanConfig& config) {
  return omgs::predict(layers, groups, model, config).iteration_end_s;
}
}  // namespace

TEST_CASE("alpha-beta model: allreduce table and formulas of P", "[plan][perf][dense]") {
  omgs::CollectiveCosts ag;
  ag.has_formula = true;
  ag.formula = {1e-6, 2e-6, 3e-7, 1e-10};
  omgs::CollectiveCosts ar;
  ar.table[4] = {5e-5, 2e-10};
  ar.has_formula = true;
  ar.formula = {1e-5, 4e-6, 0.0, 3e-10};
  const omgs::AlphaBetaModel m(omgs::TopkForm::linear, 0.0, 1e-9, ag, ar);
  // Table entry first: 4 * n bytes.
  CHECK(m.allreduce_s(1000, 4) == 5e-5 + 2e-10 * 4000.0);
  // Formula for other P: 2 (P-1)/P * 4n wire bytes, log2(P) latency steps.
  CHECK(m.allreduce_s(1000, 8) ==
        1e-5 + 4e-6 * 3.0 + 0.0 * 7.0 + 3e-10 * (2.0 * 7.0 / 8.0 * 4000.0));
  // Allgather formula: (P-1) * k * 8 bytes, k = ceil(0.01 * 1000) = 10.
  CHECK(m.allgather_s(1000, 16, 0.01) == 1e-6 + 2e-6 * 4.0 + 3e-7 * 15.0 + 1e-10 * (15.0 * 80.0));
  CHECK(m.allreduce_s(0, 8) == 0.0);
  CHECK(m.knows_allreduce(3));
  CHECK_NOTHROW(m.check_workers(4096));
  // The formula does not cover P <= 0 (a fuzzer finding: check_workers(0) was accepted).
  CHECK_FALSE(m.knows_allreduce(0));
  CHECK_THROWS_WITH(m.check_workers(0), Catch::Contains("P = 0"));
  CHECK_THROWS_WITH(m.check_workers(-3), Catch::Contains("P = -3"));

  const omgs::AlphaBetaModel old(omgs::TopkForm::linear, 0.0, 1e-9, {{4, {1e-4, 1e-9}}});
  CHECK_FALSE(old.knows_allreduce(4));
  CHECK_THROWS_WITH(old.allreduce_s(10, 4), Catch::Contains("no dense allreduce cost for P = 4"));
  CHECK_FALSE(omgs::ReferenceModel().knows_allreduce(4));
  CHECK_THROWS_WITH(omgs::ReferenceModel().allreduce_s(10, 4),
                    Catch::Contains("no dense allreduce cost"));

  omgs::CollectiveCosts table_only;
  table_only.table[2] = {1e-5, 1e-10};
  const omgs::AlphaBetaModel t(omgs::TopkForm::linear, 0.0, 1e-9,
                               omgs::CollectiveCosts{{{2, {1e-4, 1e-9}}}, false, {}}, table_only);
  CHECK(t.knows_allreduce(2));
  CHECK_FALSE(t.knows_allreduce(4));
  CHECK_THROWS_WITH(t.allreduce_s(10, 4), Catch::Contains("P = 4"));

  omgs::CollectiveCosts bad = ar;
  bad.formula.alpha_log2p_s = -1.0;
  CHECK_THROWS_WITH(omgs::AlphaBetaModel(omgs::TopkForm::linear, 0.0, 1e-9, ag, bad),
                    Catch::Contains("allreduce_formula alpha_log2p_s = -1"));
  CHECK_THROWS_WITH(omgs::AlphaBetaModel(omgs::TopkForm::linear, 0.0, 1e-9, {}, ar),
                    Catch::Contains("allgather table is empty"));
}

TEST_CASE("alpha-beta model: allreduce and formulas in JSON", "[plan][perf][dense][json]") {
  const std::string text = R"({"type": "alpha_beta",
    "topk": {"form": "nlogn", "c0_s": 1e-5, "c1_s": 2e-10},
    "allgather": [],
    "allgather_formula": {"alpha_s": 2e-6, "alpha_p_s": 1e-6, "beta_s_per_byte": 8e-10},
    "allreduce": [{"workers": 2, "alpha_s": 3e-5, "beta_s_per_byte": 1e-10}],
    "allreduce_formula": {"alpha_s": 1e-5, "alpha_log2p_s": 2e-5, "beta_s_per_byte": 8e-10}})";
  const omgs::AlphaBetaModel m = omgs::AlphaBetaModel::from_json(text, "fabric.json");
  CHECK(m.allreduce_s(100, 2) == 3e-5 + 1e-10 * 400.0);
  CHECK(m.allreduce_s(100, 4) == 1e-5 + 2e-5 * 2.0 + 8e-10 * (2.0 * 3.0 / 4.0 * 400.0));
  CHECK(m.allgather_s(1000, 4, 0.001) == 2e-6 + 1e-6 * 3.0 + 8e-10 * 24.0);
  const omgs::AlphaBetaModel back = omgs::AlphaBetaModel::from_json(m.to_json(), "back");
  CHECK(back.to_json() == m.to_json());
  for (int p : {2, 3, 4096}) {
    CHECK(back.allreduce_s(12345, p) == m.allreduce_s(12345, p));
    CHECK(back.allgather_s(12345, p, 0.01) == m.allgather_s(12345, p, 0.01));
  }
  // A model without the new members writes exactly what it wrote before.
  const omgs::AlphaBetaModel old(omgs::TopkForm::linear, 0.0, 1e-9, {{4, {1e-4, 1e-9}}});
  CHECK(old.to_json().find("allreduce") == std::string::npos);

  auto error = [](const std::string& doc) {
    try {
      omgs::AlphaBetaModel::from_json(doc, "m.json");
    } catch (const omgs::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string head =
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 0}, )";
  CHECK_THAT(error(head + R"("allgather": []})"), Catch::Contains("allgather table is empty"));
  CHECK_THAT(error(head + R"("allgather": [], "allgather_formula": {"alpha_s": 1}})"),
             Catch::Contains("allgather_formula: missing member \"beta_s_per_byte\""));
  CHECK_THAT(error(head + R"("allgather": [], "allgather_formula": {"alpha_s": 1,
             "beta_s_per_byte": 0, "gamma": 1}})"),
             Catch::Contains("unknown member \"gamma\""));
  CHECK_THAT(error(head + R"("allgather": [{"workers": 2, "alpha_s": 0, "beta_s_per_byte": 0}],
             "allreduce": [{"workers": 2, "alpha_s": -1, "beta_s_per_byte": 0}]})"),
             Catch::Contains("m.json: allreduce[0]:2: alpha_s = -1"));
  CHECK_THAT(error(head + R"("allgather": [{"workers": 2, "alpha_s": 0, "beta_s_per_byte": 0}],
             "allreduce": [{"workers": 2, "alpha_s": 0, "beta_s_per_byte": 0},
                           {"workers": 2, "alpha_s": 0, "beta_s_per_byte": 0}]})"),
             Catch::Contains("a second entry for workers = 2"));
  CHECK_THAT(error(head + R"("allgather": [{"workers": 2, "alpha_s": 0, "beta_s_per_byte": 0}],
             "allreduce": {}})"),
             Catch::Contains("\"allreduce\" must be an array"));
}

TEST_CASE("timeline: a dense group has no top-k and one allreduce", "[plan][timeline][dense]") {
  omgs::CollectiveCosts ar;
  ar.table[2] = {0.5, 0.0};
  const omgs::AlphaBetaModel m(omgs::TopkForm::linear, 0.25, 0.0,
                               omgs::CollectiveCosts{{{2, {1.0, 0.0}}}, false, {}}, ar);
  const std::vector<omgs::LayerSpec> layers = {{"a", 10, 1.0}, {"b", 20, 2.0}};
  std::vector<omgs::Group> groups = {{1, 2, 0, Collective::dense}, {0, 1, 0, Collective::sparse}};
  const omgs::Timeline t = omgs::predict(layers, groups, m, {2, 0.5, 8192});
  CHECK(t.groups[0].topk_start_s == 2.0);
  CHECK(t.groups[0].topk_end_s == 2.0);   // no top-k
  CHECK(t.groups[0].comm_end_s == 2.5);   // allreduce 0.5
  CHECK(t.groups[1].topk_end_s == 3.25);  // backward 1 + top-k 0.25
  CHECK(t.groups[1].comm_end_s == 4.25);  // allgather 1
  const omgs::Plan p =
      omgs::make_plan_from_groups(Planner::layerwise, layers, groups, m, {2, 0.5, 8192});
  CHECK(p.dense_groups() == 1);
  CHECK(p.groups[0].collective == Collective::dense);
  const std::string json = omgs::plan_to_json(p, layers, {2, 0.5, 8192});
  CHECK_THAT(json, Catch::Contains("\"collectives\": [\"dense\", \"sparse\"]"));
  // A model without the allreduce cannot predict a dense group.
  CHECK_THROWS_WITH(omgs::predict(layers, groups, omgs::ReferenceModel(), {2, 0.5, 8192}),
                    Catch::Contains("no dense allreduce cost"));
  CHECK(omgs::to_string(Collective::sparse) == "sparse");
  CHECK(omgs::to_string(Collective::sparse_allreduce) == "sparse_allreduce");
}

TEST_CASE("sparse exchange: names round-trip, unknown names are refused", "[plan]") {
  using omgs::SparseExchange;
  for (SparseExchange e :
       {SparseExchange::allgather, SparseExchange::allreduce, SparseExchange::automatic})
    CHECK(omgs::parse_sparse_exchange(omgs::to_string(e)) == e);
  CHECK_THROWS_WITH(omgs::parse_sparse_exchange("alltoall"),
                    Catch::Contains("unknown sparse exchange 'alltoall'"));
}

TEST_CASE("optimal: boundaries and collectives equal exhaustive search", "[plan][optimal][dense]") {
  std::mt19937_64 rng(19);
  std::uniform_int_distribution<std::size_t> len(1, 9);
  int dense_seen = 0, sparse_seen = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_mixed_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, len(rng));
    const omgs::PlanConfig config{workers, trial % 2 ? 0.01 : 0.001, 8192};
    const omgs::OptimalResult r = omgs::search_optimal(layers, *model, config);
    const double dp = end_of(layers, r.groups, *model, config);
    const auto brute_groups = omgs::groups_optimal_exhaustive(layers, *model, config);
    INFO("trial " << trial << " L=" << layers.size() << " " << r.note);
    REQUIRE(r.status == omgs::PlanStatus::complete);
    REQUIRE(dp == end_of(layers, brute_groups, *model, config));
    for (const omgs::Group& g : r.groups)
      (g.collective == Collective::dense ? dense_seen : sparse_seen)++;
    for (Planner p : {Planner::mgs, Planner::mgs_mixed, Planner::dense, Planner::mixed})
      REQUIRE(omgs::make_plan(p, layers, *model, config).predicted.iteration_end_s >= dp);
  }
  CHECK(dense_seen > 50);  // the models make both choices win often
  CHECK(sparse_seen > 50);
  int workers = 0;
  const auto model = omgs_test::random_mixed_model(rng, workers);
  CHECK_THROWS_WITH(omgs::groups_optimal_exhaustive(omgs_test::random_layers(rng, 13), *model,
                                                    {workers, 0.01, 8192}),
                    Catch::Contains("at most 12 layers"));
}

TEST_CASE("mgs_mixed: MGS's groups with the best collectives", "[plan][mgs][dense]") {
  std::mt19937_64 rng(1919);
  std::uniform_int_distribution<std::size_t> len(1, 40);
  for (int trial = 0; trial < 200; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_mixed_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, len(rng));
    const omgs::PlanConfig config{workers, 0.001, 8192};
    const omgs::Plan mgs = omgs::make_plan(Planner::mgs, layers, *model, config);
    const omgs::Plan mixed = omgs::make_plan(Planner::mgs_mixed, layers, *model, config);
    INFO("trial " << trial);
    // MGS itself stays all sparse; its extension keeps the boundaries.
    REQUIRE(mgs.dense_groups() == 0);
    REQUIRE(mixed.groups.size() == mgs.groups.size());
    for (std::size_t g = 0; g < mgs.groups.size(); ++g) {
      REQUIRE(mixed.groups[g].begin == mgs.groups[g].begin);
      REQUIRE(mixed.groups[g].end == mgs.groups[g].end);
    }
    REQUIRE(mixed.predicted.iteration_end_s <= mgs.predicted.iteration_end_s);
    // Exact for small plans: no other choice of collectives is faster.
    if (mgs.groups.size() <= 10) {
      std::vector<omgs::Group> groups = mgs.groups;
      for (std::uint64_t m = 0; m < (std::uint64_t{1} << groups.size()); ++m) {
        for (std::size_t g = 0; g < groups.size(); ++g)
          groups[g].collective = (m >> g) & 1u ? Collective::dense : Collective::sparse;
        REQUIRE(end_of(layers, groups, *model, config) >= mixed.predicted.iteration_end_s);
      }
    }
  }
  // Without an allreduce cost: all sparse, and the same groups as MGS.
  const auto layers = omgs_test::random_layers(rng, 30);
  const omgs::ReferenceModel ref;
  const omgs::Plan m = omgs::make_plan(Planner::mgs_mixed, layers, ref, {8, 0.001, 8192});
  CHECK(m.dense_groups() == 0);
  CHECK(m.predicted.iteration_end_s ==
        omgs::make_plan(Planner::mgs, layers, ref, {8, 0.001, 8192}).predicted.iteration_end_s);
}

TEST_CASE("mixed: the best predicted of mgs, mgs_mixed, optimal and dense", "[plan][dense]") {
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 20; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_mixed_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, 3 + trial);
    // Margin 0: the lowest prediction (the default margin's near-ties: test_choose_plan.cpp).
    const omgs::PlanConfig config{workers, 0.001, 8192, 0.0};
    const omgs::Plan mixed = omgs::make_plan(Planner::mixed, layers, *model, config);
    REQUIRE(mixed.planner == Planner::mixed);
    double best = mixed.predicted.iteration_end_s;
    bool found = false;
    for (Planner p : {Planner::mgs, Planner::mgs_mixed, Planner::optimal, Planner::dense}) {
      const omgs::Plan c = omgs::make_plan(p, layers, *model, config);
      REQUIRE(best <= c.predicted.iteration_end_s);
      found = found || (p == mixed.picked && c.predicted.iteration_end_s == best);
    }
    REQUIRE(found);
    const omgs::Plan dense = omgs::make_plan(Planner::dense, layers, *model, config);
    REQUIRE(dense.dense_groups() == dense.groups.size());
  }
  // Without the allreduce: the better of mgs and optimal, never dense.
  const auto layers = omgs_test::random_layers(rng, 20);
  const omgs::Plan m = omgs::make_plan(Planner::mixed, layers, omgs::ReferenceModel(), {4, 0.001});
  CHECK(m.dense_groups() == 0);
  CHECK((m.picked == Planner::mgs || m.picked == Planner::optimal));
  CHECK_THROWS_WITH(omgs::make_plan(Planner::dense, layers, omgs::ReferenceModel(), {4, 0.001}),
                    Catch::Contains("no dense allreduce cost"));
  for (Planner p : omgs::choice_planners()) CHECK(omgs::parse_planner(omgs::to_string(p)) == p);
}
