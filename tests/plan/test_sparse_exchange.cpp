// The third exchange (issue 33): the sparse allreduce's cost in the alpha-beta model, its
// JSON members, the per-group choice among allgather, sparse allreduce and dense allreduce
// as PlanConfig::sparse_exchange asks, checked against an exhaustive oracle, and the
// near-tie margin never choosing a plan slower than a baseline.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <omgs/plan.hpp>

#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "test_support.hpp"

using omgs::Collective;
using omgs::Planner;
using omgs::SparseExchange;

namespace {
// Ethernet-like formulas: the sparse allreduce derived from them.
omgs::AlphaBetaModel fabric(double ag_beta = 8e-10) {
  omgs::CollectiveCosts ag, ar;
  ag.has_formula = ar.has_formula = true;
  ag.formula = {1e-6, 2e-5, 3e-7, ag_beta};
  ar.formula = {2e-6, 4e-5, 0.0, 8e-10};
  return omgs::AlphaBetaModel(omgs::TopkForm::nlogn, 0.0, 2.18896957e-10, ag, ar);
}

// Every grouping and every collective of every group that `exchange` allows: the minimum
// predicted iteration end (the oracle).
double oracle(const std::vector<omgs::LayerSpec>& layers, const omgs::PerfModel& model,
              const omgs::PlanConfig& config) {
  const std::size_t L = layers.size();
  double best = INFINITY;
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (L - 1)); ++mask) {
    std::vector<omgs::Group> groups;
    std::size_t end = L;
    for (std::size_t l = L; l-- > 1;)
      if ((mask >> (l - 1)) & 1u) groups.push_back({l, std::exchange(end, l), 0});
    groups.push_back({0, end, 0});
    std::uint64_t choices = 1;
    for (std::size_t g = 0; g < groups.size(); ++g) choices *= 3;
    for (std::uint64_t c = 0; c < choices; ++c) {
      bool allowed = true;
      std::uint64_t rest = c;
      for (omgs::Group& g : groups) {
        g.collective = static_cast<Collective>(rest % 3);
        rest /= 3;
        if (g.collective == Collective::sparse_allreduce)
          allowed &= config.sparse_exchange != SparseExchange::allgather;
        if (g.collective == Collective::sparse)
          allowed &= config.sparse_exchange != SparseExchange::allreduce;
      }
      if (allowed)
        best = std::min(best, omgs::predict(layers, groups, model, config).iteration_end_s);
    }
  }
  return best;
}

}  // namespace

TEST_CASE("sparse allreduce: wire bytes and the derived formula by hand",
          "[plan][sparse_exchange]") {
  const omgs::AlphaBetaModel m = fabric();
  // k = 1000 of 1e6; P = 64: 63/64 of 2 * 8 k out to the regions and back as survivors, and
  // log2 64 = 6 recursive-doubling steps of the histogram round (2049 int64); no counts.
  const double bytes = 63.0 / 64.0 * 16000.0 + 6.0 * 16392.0;
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001) == bytes);
  // One rank: nothing moves; 3 ranks: 2 steps (the third rank folds in and gets it back);
  // 4096: 12.
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 1, 0.001) == 0.0);
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 3, 0.001) ==
        Approx(2.0 / 3.0 * 16000.0 + 2.0 * 16392.0).epsilon(1e-12));
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 4096, 0.001) ==
        Approx(4095.0 / 4096.0 * 16000.0 + 12.0 * 16392.0).epsilon(1e-12));
  // alpha = 2e-6 + 2 * 1e-6 (the histogram allreduce, the pairs' and the survivors' rounds),
  // log2 P: the allreduce's 4e-5, P - 1: 2 * 3e-7 + 2e-5.
  const double t = 4e-6 + 4e-5 * 6.0 + (6e-7 + 2e-5) * 63.0 + 8e-10 * bytes;
  CHECK(m.sparse_allreduce_s(1000000, 64, 0.001) == Approx(t).epsilon(1e-12));
  CHECK(m.knows_sparse_allreduce(4096));
  CHECK(m.sparse_allreduce_s(0, 64, 0.001) == 0.0);
  // beta: the larger of the two.
  CHECK(fabric(2e-9).sparse_allreduce_effective_costs().formula.beta_s_per_byte == 2e-9);
  // At large P the allgather grows with P k, the sparse allreduce with k + P.
  CHECK(m.sparse_allreduce_s(100000000, 4096, 0.001) < m.allgather_s(100000000, 4096, 0.001));
  CHECK(m.sparse_allreduce_s(1000000, 2, 0.001) > m.allgather_s(1000000, 2, 0.001));
  // Without both formulas it is not derived; the default PerfModel does not know it.
  const omgs::AlphaBetaModel tables(omgs::TopkForm::linear, 0.0, 1e-9, {{4, {1e-5, 1e-10}}});
  CHECK_FALSE(tables.knows_sparse_allreduce(4));
  CHECK_THROWS_WITH(tables.sparse_allreduce_s(10, 4, 0.1), Catch::Contains("sparse allreduce"));
  CHECK_FALSE(omgs::ReferenceModel().knows_sparse_allreduce(4));
  CHECK_THROWS_WITH(omgs::ReferenceModel().sparse_allreduce_s(10, 4, 0.1),
                    Catch::Contains("sparse_allreduce_formula"));
  // Given costs: the table for its P, the formula elsewhere; both replace the derived ones.
  omgs::CollectiveCosts given;
  given.table[4] = {1e-3, 1e-9};
  const omgs::AlphaBetaModel t4 = tables.with_sparse_allreduce(given);
  CHECK(t4.knows_sparse_allreduce(4));
  CHECK_FALSE(t4.knows_sparse_allreduce(8));
  CHECK(t4.sparse_allreduce_s(1000, 4, 0.01) ==
        1e-3 + 1e-9 * omgs::AlphaBetaModel::sparse_allreduce_bytes(1000, 4, 0.01));
  given.table[4].alpha_s = -1.0;
  CHECK_THROWS_WITH(tables.with_sparse_allreduce(given), Catch::Contains("sparse_allreduce entry"));
  // Kept by with_topk and the element bytes.
  CHECK(t4.with_topk({}).knows_sparse_allreduce(4));
  CHECK(t4.with_allreduce_element_bytes(2.0).knows_sparse_allreduce(4));
}

TEST_CASE("sparse allreduce: the compact pair format's bytes per pair in the cost",
          "[plan][sparse_exchange]") {
  // k = 1000 of 1e6, P = 64, 3.9 bytes per pair: 63/64 2 * 3.9 k + 6 histogram steps.
  const double bytes = 63.0 / 64.0 * 7800.0 + 6.0 * 16392.0;
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001, 3.9) ==
        Approx(bytes).epsilon(1e-12));
  CHECK(omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001, 8.0) ==
        omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001));
  // with_pair_bytes: the formula's and the table's beta multiply the format's bytes.
  const omgs::AlphaBetaModel m = fabric(), c = m.with_pair_bytes(3.9);
  const double saved =
      8e-10 * (omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001) -
               omgs::AlphaBetaModel::sparse_allreduce_bytes(1000000, 64, 0.001, 3.9));
  CHECK(m.sparse_allreduce_s(1000000, 64, 0.001) - c.sparse_allreduce_s(1000000, 64, 0.001) ==
        Approx(saved).epsilon(1e-9));
  omgs::CollectiveCosts given;
  given.table[4] = {1e-3, 1e-9};
  const omgs::AlphaBetaModel t4 = c.with_sparse_allreduce(given);
  CHECK(t4.sparse_allreduce_s(1000, 4, 0.01) ==
        1e-3 + 1e-9 * omgs::AlphaBetaModel::sparse_allreduce_bytes(1000, 4, 0.01, 3.9));
  CHECK(t4.with_topk({}).pair_bytes() == 3.9);  // kept with the sparse allreduce's costs
}

TEST_CASE("sparse allreduce: JSON members, round trip and bad input", "[plan][sparse_exchange]") {
  const std::string head =
      "{\"type\": \"alpha_beta\", \"topk\": {\"form\": \"linear\", \"c0_s\": 0, \"c1_s\": 1e-9},\n"
      " \"allgather\": [{\"workers\": 4, \"alpha_s\": 1e-5, \"beta_s_per_byte\": 1e-10}]";
  const omgs::AlphaBetaModel m = omgs::AlphaBetaModel::from_json(
      head + ",\n \"sparse_allreduce\": [{\"workers\": 4, \"alpha_s\": 2e-4, " +
      "\"beta_s_per_byte\": 3e-10}],\n \"sparse_allreduce_formula\": {\"alpha_s\": 1e-4, " +
      "\"alpha_p_s\": 1e-6, \"beta_s_per_byte\": 5e-10}}");
  const double b4 = omgs::AlphaBetaModel::sparse_allreduce_bytes(5000, 4, 0.01);
  const double b8 = omgs::AlphaBetaModel::sparse_allreduce_bytes(5000, 8, 0.01);
  CHECK(m.sparse_allreduce_s(5000, 4, 0.01) == 2e-4 + 3e-10 * b4);
  CHECK(m.sparse_allreduce_s(5000, 8, 0.01) == 1e-4 + 1e-6 * 7.0 + 5e-10 * b8);
  const omgs::AlphaBetaModel back = omgs::AlphaBetaModel::from_json(m.to_json());
  CHECK(back.sparse_allreduce_s(5000, 4, 0.01) == m.sparse_allreduce_s(5000, 4, 0.01));
  CHECK(back.sparse_allreduce_s(5000, 8, 0.01) == m.sparse_allreduce_s(5000, 8, 0.01));
  CHECK_THAT(m.describe(), Catch::Contains("sparse_allreduce P=4"));
  // The derived formula is not written: a saved model reads back the same either way.
  CHECK(fabric().to_json().find("sparse_allreduce") == std::string::npos);
  const struct {
    const char* member;
    const char* error;
  } bad[] = {
      {"\"sparse_allreduce\": {}", "\"sparse_allreduce\" must be an array"},
      {"\"sparse_allreduce\": [3]", "sparse_allreduce[0] must be an object"},
      {"\"sparse_allreduce\": [{\"workers\": 0, \"alpha_s\": 0, \"beta_s_per_byte\": 0}]",
       "positive integer"},
      {"\"sparse_allreduce\": [{\"workers\": 2, \"alpha_s\": -1, \"beta_s_per_byte\": 0}]",
       "must be finite and >= 0"},
      {"\"sparse_allreduce\": [{\"workers\": 2, \"alpha_s\": 0, \"beta_s_per_byte\": 0}, "
       "{\"workers\": 2, \"alpha_s\": 0, \"beta_s_per_byte\": 0}]",
       "a second entry for workers = 2"},
      {"\"sparse_allreduce_formula\": {\"alpha_s\": 0}", "missing member \"beta_s_per_byte\""},
      {"\"sparse_allreduce_formula\": {\"alpha_s\": 0, \"beta_s_per_byte\": 0, \"x\": 1}",
       "unknown member \"x\""},
      {"\"sparse_allreduce_formula\": [1]", "sparse_allreduce_formula must be an object"},
  };
  for (const auto& b : bad) {
    INFO(b.member);
    CHECK_THROWS_WITH(omgs::AlphaBetaModel::from_json(head + ", " + b.member + "}", "doc.json"),
                      Catch::Contains("doc.json") && Catch::Contains(b.error));
  }
}

TEST_CASE("sparse exchange: each mode honoured by every planner", "[plan][sparse_exchange]") {
  std::mt19937_64 rng(33);
  const omgs::AlphaBetaModel m = fabric();
  const auto layers = omgs_test::random_layers(rng, 30, 20'000'000);
  for (int p : {2, 64, 4096}) {
    for (Planner planner :
         {Planner::mgs, Planner::layerwise, Planner::single, Planner::threshold, Planner::optimal,
          Planner::mgs_mixed, Planner::dense, Planner::mixed, Planner::automatic}) {
      INFO("P = " << p << ", " << omgs::to_string(planner));
      omgs::PlanConfig config{p, 0.001};
      CHECK(omgs_test::count_collective(omgs::make_plan(planner, layers, m, config).groups,
                                        Collective::sparse_allreduce) == 0);
      config.sparse_exchange = SparseExchange::allreduce;
      const omgs::Plan all = omgs::make_plan(planner, layers, m, config);
      CHECK(omgs_test::count_collective(all.groups, Collective::sparse) == 0);
      config.sparse_exchange = SparseExchange::automatic;
      for (const omgs::Group& g : omgs::make_plan(planner, layers, m, config).groups) {
        if (g.collective == Collective::dense) continue;
        const double ag = m.allgather_s(g.numel, p, 0.001);
        const double sar = m.sparse_allreduce_s(g.numel, p, 0.001);
        CHECK(g.collective == (sar < ag ? Collective::sparse_allreduce : Collective::sparse));
      }
    }
  }
  // allreduce with a model that cannot predict it: a clear error; automatic: the allgather.
  const omgs::AlphaBetaModel tables(omgs::TopkForm::linear, 0.0, 1e-9, {{4, {1e-5, 1e-10}}});
  omgs::PlanConfig config{4, 0.01};
  config.sparse_exchange = SparseExchange::allreduce;
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, layers, tables, config),
                    Catch::Contains("no sparse allreduce cost for P = 4"));
  config.sparse_exchange = SparseExchange::automatic;
  CHECK(
      omgs_test::count_collective(omgs::make_plan(Planner::optimal, layers, tables, config).groups,
                                  Collective::sparse_allreduce) == 0);
}

TEST_CASE("sparse exchange: the optimal search and the oracle agree", "[plan][sparse_exchange]") {
  std::mt19937_64 rng(3033);
  std::uniform_int_distribution<std::size_t> len(1, 6);
  for (int trial = 0; trial < 40; ++trial) {
    const auto layers = omgs_test::random_layers(rng, len(rng), 200'000'000);
    const double ag_beta = trial % 2 ? 8e-10 : 4e-9;  // the allgather cheap or dear
    const omgs::AlphaBetaModel m = fabric(ag_beta);
    for (int p : {2, 256, 4096}) {
      for (SparseExchange e :
           {SparseExchange::allgather, SparseExchange::allreduce, SparseExchange::automatic}) {
        omgs::PlanConfig config{p, 0.001};
        config.sparse_exchange = e;
        INFO("trial " << trial << ", P = " << p << ", " << omgs::to_string(e));
        const double best = oracle(layers, m, config);
        const omgs::Plan opt = omgs::make_plan(Planner::optimal, layers, m, config);
        CHECK(opt.predicted.iteration_end_s == Approx(best).epsilon(1e-12));
        const auto ex = omgs::groups_optimal_exhaustive(layers, m, config);
        CHECK(omgs::predict(layers, ex, m, config).iteration_end_s == Approx(best).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("sparse exchange: near-ties never slower than dense or the sparse allreduce",
          "[plan][sparse_exchange][choice]") {
  auto plan = [](std::size_t groups, Collective c, double t) {
    omgs::Plan p;
    for (std::size_t g = 0; g < groups; ++g) p.groups.push_back({g, g + 1, 1, c});
    p.predicted.iteration_end_s = t;
    return p;
  };
  // Without a baseline the one group within 10% wins; a baseline below it caps the margin.
  const omgs::Plan fast = plan(10, Collective::sparse, 1.0);
  const omgs::Plan single = plan(1, Collective::sparse, 1.09);
  CHECK(omgs::choose_plan({fast, single}) == 1);
  CHECK(omgs::choose_plan({fast, single, plan(3, Collective::dense, 1.05)}) == 2);
  CHECK(omgs::choose_plan({fast, single, plan(3, Collective::sparse_allreduce, 1.05)}) == 2);
  CHECK(omgs::choose_plan({fast, single, plan(12, Collective::dense, 1.05)}) == 0);
  // mixed and automatic with the automatic exchange: never above the all-sparse-allreduce
  // MGS plan (a candidate) nor dense, whatever the margin.
  std::mt19937_64 rng(4096);
  const omgs::AlphaBetaModel m = fabric();
  for (int trial = 0; trial < 6; ++trial) {
    const auto layers = omgs_test::random_layers(rng, 25, 50'000'000);
    for (int p : {64, 1024, 4096}) {
      omgs::PlanConfig config{p, 0.001, 8192, 1.0, SparseExchange::automatic};
      omgs::PlanConfig all = config;
      all.sparse_exchange = SparseExchange::allreduce;
      const double sar = omgs::make_plan(Planner::mgs, layers, m, all).predicted.iteration_end_s;
      const double dense =
          omgs::make_plan(Planner::dense, layers, m, config).predicted.iteration_end_s;
      for (Planner planner : {Planner::mixed, Planner::automatic}) {
        INFO("trial " << trial << ", P = " << p << ", " << omgs::to_string(planner));
        const double t = omgs::make_plan(planner, layers, m, config).predicted.iteration_end_s;
        CHECK(t <= sar);
        CHECK(t <= dense);
      }
    }
  }
  // The mix counts three kinds: all one kind beats two of three.
  omgs::Plan two = plan(3, Collective::sparse, 1.0);
  two.groups[0].collective = Collective::sparse_allreduce;
  CHECK(omgs::choose_plan({two, plan(3, Collective::sparse, 1.0)}) == 1);
}
