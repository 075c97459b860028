// The planner's table of collectives (src/plan/collective_table.hpp): each built-in row's
// cost and bytes by hand, rows refusing groups they cannot serve (an MPI int count over
// INT_MAX, a memory budget), the registry, and a collective registered only here (a dense
// "reduce_bcast" with its own cost) that the optimal search, the exhaustive oracle and the
// collective chooser pick when it is fastest, and never when it is slower or not allowed.
#include <climits>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "plan/collective_costs.hpp"
#include "plan/collective_table.hpp"
#include "plan/loop_candidate.hpp"
#include "plan/timeline_fit.hpp"
#include "test_support.hpp"

using omgs::Collective;
using omgs::Planner;
using omgs::detail::collective_row;

namespace {

// Tables at P = 4: allgather 1e-5 + 1e-9 * (P k 8), allreduce 2e-5 + 1e-9 * (4 n), sparse
// allreduce 3e-5 + 2e-9 * its wire bytes.
omgs::AlphaBetaModel table_model() {
  omgs::CollectiveCosts ag, ar, sar;
  ag.table[4] = ag.table[8] = {1e-5, 1e-9};
  ar.table[4] = {2e-5, 1e-9};
  sar.table[4] = {3e-5, 2e-9};
  return omgs::AlphaBetaModel(omgs::TopkForm::linear, 0.0, 1e-9, ag, ar).with_sparse_allreduce(sar);
}

// The test-only collective's time: rb_factor times the model's dense allreduce.
double rb_factor = 0.5;

Collective reduce_bcast() {
  static const Collective id = [] {
    omgs::detail::CollectiveRow r;
    r.name = "reduce_bcast";
    r.time_s = [](const omgs::PerfModel& m, std::uint64_t n, int p, double) {
      return rb_factor * m.allreduce_s(n, p);
    };
    r.known = [](const omgs::PerfModel& m, int p) { return m.knows_allreduce(p); };
    r.wire_bytes = [](std::uint64_t n, int, double) { return 8.0 * static_cast<double>(n); };
    r.memory_bytes = [](std::uint64_t n, int, double) { return 4.0 * static_cast<double>(n); };
    r.max_mpi_count = [](std::uint64_t n, int, double) { return n; };
    return omgs::detail::register_collective(std::move(r));
  }();
  return id;
}

double end_of(const std::vector<omgs::LayerSpec>& layers, const std::vector<omgs::Group>& groups,
              const omgs::PerfModel& model, const omgs::PlanConfig& config) {
  return omgs::predict(layers, groups, model, config).iteration_end_s;
}

}  // namespace

TEST_CASE("collective table: each built-in row's cost and bytes by hand", "[plan][table]") {
  const omgs::AlphaBetaModel m = table_model();
  const std::uint64_t n = 10000;  // k = 100 at density 0.01
  const double d = 0.01;
  const auto& ag = collective_row(Collective::sparse);
  const auto& ar = collective_row(Collective::dense);
  const auto& sar = collective_row(Collective::sparse_allreduce);
  CHECK(ag.name == "sparse");
  CHECK(ar.name == "dense");
  CHECK(sar.name == "sparse_allreduce");
  CHECK((ag.sparsifies && !ar.sparsifies && sar.sparsifies));
  CHECK((!ag.baseline && ar.baseline && sar.baseline));
  // Times: alpha + beta * the table's bytes.
  CHECK(ag.time_s(m, n, 4, d) == Approx(1e-5 + 1e-9 * (4 * 100 * 8)).epsilon(1e-14));
  CHECK(ar.time_s(m, n, 4, d) == Approx(2e-5 + 1e-9 * (4 * 10000)).epsilon(1e-14));
  // (P-1)/P 2 k 8 + log2 P histogram steps of 16392 bytes = 0.75 * 1600 + 32784 = 33984.
  CHECK(sar.time_s(m, n, 4, d) == Approx(3e-5 + 2e-9 * 33984).epsilon(1e-14));
  // Known: the allgather always (check_workers refuses a bad P), the others where given.
  CHECK(ag.known(m, 8));
  CHECK((ar.known(m, 4) && !ar.known(m, 8)));
  CHECK((sar.known(m, 4) && !sar.known(m, 8)));
  CHECK_THROWS_WITH(ar.time_s(m, n, 8, d), Catch::Contains("P = 8"));
  // Wire bytes per rank: (P-1) k 8; 2 (P-1)/P 4 n; the sparse allreduce's.
  CHECK(ag.wire_bytes(n, 4, d) == 2400.0);
  CHECK(ar.wire_bytes(n, 4, d) == 60000.0);
  CHECK(sar.wire_bytes(n, 4, d) == 33984.0);
  // Memory per rank: k (1 + P) pairs; the gradient's send and receive floats; the sparse
  // allreduce's k (1 + P) pairs, k dropped and its exchange's room: 3 k own, 500 received
  // (k + 400 sums), 3 x 400 sums, 2 k survivors, 2 k window keys = 2500, none of it P k.
  CHECK(ag.memory_bytes(n, 4, d) == 8.0 * 100 * 5);
  CHECK(ar.memory_bytes(n, 4, d) == 8.0 * 10000);
  // The sparse allreduce: k sent, k + P - 1 survivors, k dropped, the engine's room (23 k
  // and its own k + P - 1 survivors where n / P >= 4 k).
  CHECK(sar.memory_bytes(n, 4, d) == 8.0 * (100 + 103 + 100 + 2300 + 103));
  // At P = 64 the regions (157 elements) bound the sums: 3 k + 257 + 3 x 157 + 200 + 200.
  CHECK(sar.memory_bytes(n, 64, d) == 8.0 * (100 + 163 + 100 + 300 + 257 + 471 + 163 + 100 + 200));
  // MPI counts: k P pairs; n floats.
  CHECK(ag.max_mpi_count(n, 4, d) == 400);
  CHECK(ar.max_mpi_count(n, 4, d) == 10000);
  CHECK(sar.max_mpi_count(n, 4, d) == 400);
}

TEST_CASE("collective table: a row refuses a group it cannot serve", "[plan][table]") {
  using omgs::detail::ServeLimits;
  using omgs::detail::serves;
  const auto& ag = collective_row(Collective::sparse);
  const auto& ar = collective_row(Collective::dense);
  const auto& sar = collective_row(Collective::sparse_allreduce);
  const ServeLimits ints{omgs::detail::mpi_int_count, 0};
  CHECK(omgs::detail::mpi_int_count == std::uint64_t{INT_MAX});
  // k = 10^6 pairs: 2048 ranks receive 2.048e9 < INT_MAX pairs, 4096 ranks 4.096e9 > INT_MAX,
  // which the sparse allreduce's wire refuses and the allgather's splits over posts.
  const std::uint64_t n = 1'000'000'000;
  CHECK(serves(sar, n, 2048, 0.001, ints));
  CHECK_FALSE(serves(sar, n, 4096, 0.001, ints));
  CHECK(serves(ag, n, 4096, 0.001, ints));
  CHECK(ag.max_mpi_count(n, 4096, 0.001) == std::uint64_t{INT_MAX});
  CHECK(serves(sar, n, 4096, 0.001, ServeLimits{}));  // no limit: a prediction
  // The dense allreduce splits its floats over posts of at most an int: any size is served.
  CHECK(serves(ar, std::uint64_t{INT_MAX}, 4, 0.001, ints));
  CHECK(serves(ar, 6'700'000'000, 4, 0.001, ints));
  CHECK(ar.max_mpi_count(6'700'000'000, 4, 0.001) == std::uint64_t{INT_MAX});
  // A memory budget: the allgather of k = 100 on 4 ranks needs 4000 bytes.
  CHECK(serves(ag, 10000, 4, 0.01, ServeLimits{0, 4000}));
  CHECK_FALSE(serves(ag, 10000, 4, 0.01, ServeLimits{0, 3999}));
  omgs::PlanConfig c;
  c.max_mpi_count = 7;
  c.memory_budget_bytes = 9;
  CHECK(omgs::detail::serve_limits(c).max_mpi_count == 7);
  CHECK(omgs::detail::serve_limits(c).memory_budget_bytes == 9);
}

namespace {
// Three layers of 1.5e9 elements, an allgather too slow to use and an allreduce whose
// start-up makes one merged dense group the fastest: 4.5e9 floats, past MPI's int count,
// which the dense wire splits over several posts.
class HugeDenseModel final : public omgs::PerfModel {
 public:
  double topk_s(std::uint64_t n) const override { return 1e-9 * static_cast<double>(n); }
  double allgather_s(std::uint64_t, int, double) const override { return 100.0; }
  void check_workers(int) const override {}
  std::string describe() const override { return "huge dense test model"; }
  bool knows_allreduce(int) const override { return true; }
  double allreduce_s(std::uint64_t n, int) const override {
    return 0.5 + 1e-12 * static_cast<double>(n);
  }
};
}  // namespace

TEST_CASE("collective table: a dense group past MPI's int counts is kept when the run limits them",
          "[plan][table]") {
  const HugeDenseModel m;
  const std::vector<omgs::LayerSpec> layers = {
      {"a", 1'500'000'000, 1e-3}, {"b", 1'500'000'000, 1e-3}, {"c", 1'500'000'000, 1e-3}};
  omgs::PlanConfig c{4, 0.001, 8192};
  for (Planner p : {Planner::optimal, Planner::dense, Planner::mgs_mixed}) {
    INFO(omgs::to_string(p));
    c.max_mpi_count = 0;  // no limit: the prediction merges into one dense group
    const omgs::Plan free = omgs::make_plan(p, layers, m, c);
    CHECK(omgs_test::count_collective(free.groups, Collective::dense) == free.groups.size());
    if (p != Planner::mgs_mixed) CHECK(free.groups.size() == 1);
    c.max_mpi_count = omgs::detail::mpi_int_count;
    const omgs::Plan ints = omgs::make_plan(p, layers, m, c);
    CHECK(ints.groups.size() == free.groups.size());
    for (const omgs::Group& g : ints.groups)
      if (g.end - g.begin > 1 || p != Planner::mgs_mixed)
        CHECK(collective_row(g.collective).max_mpi_count(g.numel, 4, 0.001) <= INT_MAX);
  }
}

TEST_CASE("collective table: the registry, names and the allowed sets", "[plan][table]") {
  const auto& rows = omgs::detail::collective_rows();
  REQUIRE(rows.size() >= 3);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(static_cast<std::size_t>(rows[i].id) == i);
    CHECK(omgs::to_string(rows[i].id) == rows[i].name);
    CHECK(omgs::parse_collective(rows[i].name) == rows[i].id);
    CHECK(omgs::detail::find_collective_row(rows[i].name) == &rows[i]);
  }
  CHECK(omgs::detail::find_collective_row("alltoall") == nullptr);
  CHECK(omgs::to_string(static_cast<Collective>(250)) == "unknown");
  CHECK_THROWS_WITH(omgs::parse_collective("alltoall"),
                    Catch::Contains("unknown collective 'alltoall'") &&
                        Catch::Contains("sparse, dense, sparse_allreduce"));
  CHECK_THROWS_WITH(collective_row(static_cast<Collective>(250)), Catch::Contains("no row"));
  omgs::detail::CollectiveRow bad = collective_row(Collective::dense);
  CHECK_THROWS_WITH(omgs::detail::register_collective(bad), Catch::Contains("already registered"));
  bad.name = "";
  CHECK_THROWS_WITH(omgs::detail::register_collective(bad), Catch::Contains("needs a name"));
  bad.name = "half_a_row";
  bad.memory_bytes = nullptr;
  CHECK_THROWS_WITH(omgs::detail::register_collective(bad), Catch::Contains("memory_bytes"));
  CHECK(omgs::detail::find_collective_row("half_a_row") == nullptr);

  using omgs::CollectiveSet;
  omgs::PlanConfig c;
  CHECK(omgs::allowed_collectives(c) == CollectiveSet{Collective::sparse, Collective::dense});
  c.sparse_exchange = omgs::SparseExchange::allreduce;
  CHECK(omgs::allowed_collectives(c) ==
        CollectiveSet{Collective::sparse_allreduce, Collective::dense});
  c.sparse_exchange = omgs::SparseExchange::automatic;
  CHECK(omgs::allowed_collectives(c) ==
        CollectiveSet{Collective::sparse, Collective::sparse_allreduce, Collective::dense});
  c.workers = 2;  // the sparse allreduce cannot beat the allgather at two ranks
  CHECK(omgs::allowed_collectives(c) == CollectiveSet{Collective::sparse, Collective::dense});
  c.sparse_exchange = omgs::SparseExchange::allreduce;  // unless asked for
  CHECK(omgs::allowed_collectives(c) ==
        CollectiveSet{Collective::sparse_allreduce, Collective::dense});
  c.workers = 3;
  c.sparse_exchange = omgs::SparseExchange::automatic;
  CHECK(omgs::allowed_collectives(c) ==
        CollectiveSet{Collective::sparse, Collective::sparse_allreduce, Collective::dense});
  c.collectives = {Collective::sparse};  // an explicit set wins
  CHECK(omgs::allowed_collectives(c) == CollectiveSet{Collective::sparse});
  CHECK(c.collectives.size() == 1);
  CHECK(c.collectives.contains(Collective::sparse));
  CHECK_FALSE(c.collectives.contains(Collective::dense));
  c.collectives.insert(static_cast<Collective>(255));  // any id, registered or not
  CHECK(c.collectives.contains(static_cast<Collective>(255)));
  CHECK(c.collectives != CollectiveSet{Collective::sparse});
  c.collectives.erase(static_cast<Collective>(255));
  c.collectives.erase(Collective::sparse);
  CHECK(c.collectives.empty());
}

TEST_CASE("collective table: a set of collectives by name, and back", "[plan][table]") {
  using omgs::CollectiveSet;
  CHECK(omgs::parse_collective_set("") == CollectiveSet{});
  CHECK(omgs::parse_collective_set("  ") == CollectiveSet{});
  const CollectiveSet three = omgs::parse_collective_set(" dense ,sparse_allreduce,sparse");
  CHECK(three ==
        CollectiveSet{Collective::sparse, Collective::dense, Collective::sparse_allreduce});
  CHECK(omgs::to_string(three) == "sparse,dense,sparse_allreduce");  // id order
  CHECK(omgs::parse_collective_set(omgs::to_string(three)) == three);
  CHECK(omgs::to_string(CollectiveSet{}).empty());
  CHECK(omgs::parse_collective_set("dense,dense") == CollectiveSet{Collective::dense});
  CHECK_THROWS_WITH(omgs::parse_collective_set("sparse,alltoall"),
                    Catch::Contains("unknown collective 'alltoall'"));
  CHECK_THROWS_WITH(omgs::parse_collective_set("sparse,"), Catch::Contains("an empty name"));
  CHECK_THROWS_WITH(omgs::parse_collective_set(",dense"), Catch::Contains("an empty name"));
}

TEST_CASE("collective table: the all-sparse planners take the allowed row with a top-k",
          "[plan][table]") {
  const omgs::AlphaBetaModel m = table_model();
  std::mt19937_64 rng(44);
  const auto layers = omgs_test::random_layers(rng, 12);
  omgs::PlanConfig c{4, 0.01, 8192};
  c.collectives = {Collective::sparse_allreduce};  // no dense, no allgather
  for (Planner p :
       {Planner::mgs, Planner::layerwise, Planner::single, Planner::threshold, Planner::optimal}) {
    const omgs::Plan plan = omgs::make_plan(p, layers, m, c);
    CHECK(omgs_test::count_collective(plan.groups, Collective::sparse_allreduce) ==
          plan.groups.size());
  }
  // No collective without a top-k allowed: the choosing planners keep to the allowed one.
  for (Planner p : {Planner::mgs_mixed, Planner::mixed, Planner::automatic}) {
    const omgs::Plan plan = omgs::make_plan(p, layers, m, c);
    CHECK(omgs_test::count_collective(plan.groups, Collective::sparse_allreduce) ==
          plan.groups.size());
  }
  CHECK_THROWS_WITH(omgs::make_plan(Planner::dense, layers, m, c),
                    Catch::Contains("needs an allowed collective without a top-k"));
  c.collectives = {Collective::dense};
  CHECK_THROWS_WITH(omgs::make_plan(Planner::mgs, layers, m, c),
                    Catch::Contains("needs an allowed collective with a top-k"));
  CHECK(omgs_test::count_collective(omgs::make_plan(Planner::dense, layers, m, c).groups,
                                    Collective::dense) > 0);
  c.workers = 8;  // the model knows no sparse allreduce for P = 8
  c.collectives = {Collective::sparse_allreduce};
  CHECK_THROWS_WITH(omgs::make_plan(Planner::layerwise, layers, m, c),
                    Catch::Contains("no sparse allreduce cost for P = 8"));
}

TEST_CASE("collective table: a memory budget keeps the choosing planners' groups within it",
          "[plan][table]") {
  std::mt19937_64 rng(4404);
  int over_without = 0, dense_within = 0;
  for (int trial = 0; trial < 40;) {
    int workers = 0;
    const auto model = omgs_test::random_mixed_model(rng, workers);
    if (workers > 16) continue;  // the allgather of 5 M elements fits the budget (6.8 MB)
    ++trial;
    const auto layers = omgs_test::random_layers(rng, 10);
    omgs::PlanConfig c{workers, 0.01, 8192};
    c.memory_budget_bytes = 8 * 3'000'000;  // dense groups up to 3 M elements
    omgs::PlanConfig unlimited = c;
    unlimited.memory_budget_bytes = 0;
    for (Planner p : {Planner::mgs_mixed, Planner::optimal}) {
      for (const omgs::Group& g : omgs::make_plan(p, layers, *model, c).groups) {
        const auto& row = collective_row(g.collective);
        CHECK(row.memory_bytes(g.numel, workers, 0.01) <= double(c.memory_budget_bytes));
        dense_within += g.collective == Collective::dense;
      }
      for (const omgs::Group& g : omgs::make_plan(p, layers, *model, unlimited).groups)
        over_without += g.collective == Collective::dense && g.numel > 3'000'000;
    }
  }
  CHECK(dense_within > 0);
  CHECK(over_without > 0);  // the budget changed plans
}

TEST_CASE("collective table: a registered collective is planned when it is fastest",
          "[plan][table]") {
  const Collective rb = reduce_bcast();
  CHECK(omgs::to_string(rb) == "reduce_bcast");
  CHECK(omgs::parse_collective("reduce_bcast") == rb);
  CHECK(static_cast<int>(rb) >= 3);
  std::mt19937_64 rng(4444);
  int rb_seen = 0, dense_seen = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int workers = 0;
    const auto model = omgs_test::random_mixed_model(rng, workers);
    const auto layers = omgs_test::random_layers(rng, 1 + trial % 8);
    omgs::PlanConfig with{workers, 0.01, 8192};
    with.collectives = {Collective::sparse, Collective::dense, rb};
    omgs::PlanConfig without = with;
    without.collectives.erase(rb);
    for (double factor : {0.5, 2.0}) {
      rb_factor = factor;
      INFO("trial " << trial << " factor " << factor);
      // The optimal search equals the oracle over every grouping and every row.
      const omgs::OptimalResult r = omgs::search_optimal(layers, *model, with);
      REQUIRE(r.status == omgs::PlanStatus::complete);
      const auto brute = omgs::groups_optimal_exhaustive(layers, *model, with);
      REQUIRE(end_of(layers, r.groups, *model, with) == end_of(layers, brute, *model, with));
      const auto chosen =
          omgs::choose_collectives(layers, omgs::groups_mgs(layers, *model, with), *model, with);
      // Cheaper than the dense allreduce: it replaces it; dearer: never chosen.
      for (const auto* groups : {&r.groups, &brute, &chosen}) {
        CHECK(omgs_test::count_collective(*groups, factor < 1 ? Collective::dense : rb) == 0);
        (factor < 1 ? rb_seen : dense_seen) +=
            int(omgs_test::count_collective(*groups, factor < 1 ? rb : Collective::dense));
      }
      // Not allowed: never chosen.
      CHECK(omgs_test::count_collective(omgs::search_optimal(layers, *model, without).groups, rb) ==
            0);
      CHECK(omgs_test::count_collective(
                omgs::make_plan(Planner::mixed, layers, *model, without).groups, rb) == 0);
    }
  }
  CHECK(rb_seen > 20);
  CHECK(dense_seen > 20);
  // predict(): no top-k, the row's own time; the plan's JSON names it.
  rb_factor = 0.5;
  int workers = 0;
  const auto model = omgs_test::random_mixed_model(rng, workers);
  const std::vector<omgs::LayerSpec> one = {{"w", 1000, 1e-3}};
  omgs::PlanConfig c{workers, 0.01, 8192};
  c.collectives = {Collective::sparse, rb};
  const omgs::Timeline t = omgs::predict(one, {{0, 1, 1000, rb}}, *model, c);
  CHECK(t.groups[0].topk_end_s == t.groups[0].topk_start_s);
  CHECK(t.comm_total_s == 0.5 * model->allreduce_s(1000, workers));
  const omgs::Plan p =
      omgs::make_plan_from_groups(Planner::optimal, one, {{0, 1, 0, rb}}, *model, c);
  CHECK(omgs::plan_to_json(p, one, c).find("\"collectives\": [\"reduce_bcast\"]") !=
        std::string::npos);
}

namespace {
// The test-only line "p2p_pairs": the allgather's pairs posted as P - 1 point-to-point
// messages, whose beta multiplies the (P - 1) k 8 bytes each rank receives.
double p2p_bytes(std::uint64_t numel, int workers, double density,
                 const omgs::detail::LineFormat& format) {
  return (workers - 1.0) * static_cast<double>(omgs::selected_count(numel, density)) *
         format.pair_bytes;
}
}  // namespace

TEST_CASE("collective table: a row with a line is timed by the model's line of that name",
          "[plan][table][lines]") {
  omgs::detail::register_line_bytes("p2p_pairs", p2p_bytes, p2p_bytes);
  static const Collective p2p = [] {
    omgs::detail::CollectiveRow r;
    r.name = "p2p_pairs";
    r.line = "p2p_pairs";  // time_s and known from the model's line
    r.sparsifies = true;
    r.wire_bytes = [](std::uint64_t n, int p, double d) {
      return p2p_bytes(n, p, d, omgs::detail::LineFormat{});
    };
    r.memory_bytes = [](std::uint64_t n, int p, double d) {
      return 8.0 * static_cast<double>(omgs::selected_count(n, d)) * (1.0 + p);
    };
    r.max_mpi_count = [](std::uint64_t n, int, double d) { return omgs::selected_count(n, d); };
    return omgs::detail::register_collective(std::move(r));
  }();
  CHECK(collective_row(p2p).line == "p2p_pairs");
  // Tables at P = 4: allgather 1e-4 + 1e-9 (P k 8); p2p_pairs alpha 5e-5 or 5e-3.
  auto model = [](double alpha) {
    return omgs::AlphaBetaModel::from_json(
        R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
            "allgather": [{"workers": 4, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9}],
            "p2p_pairs": [{"workers": 4, "alpha_s": )" +
        std::to_string(alpha) + R"(, "beta_s_per_byte": 1e-9}]})");
  };
  const std::vector<omgs::LayerSpec> layers = {{"a", 100000, 1e-3}, {"b", 2000, 1e-3}};
  omgs::PlanConfig c{4, 0.01, 8192};
  c.collectives = {Collective::sparse, p2p};
  const omgs::AlphaBetaModel cheap = model(5e-5), dear = model(5e-3);
  CHECK(collective_row(p2p).time_s(cheap, 1000, 4, 0.01) ==
        cheap.collective_s("p2p_pairs", 1000, 4, 0.01));
  CHECK(collective_row(p2p).known(cheap, 4));
  CHECK_FALSE(collective_row(p2p).known(cheap, 8));  // no line for P = 8
  // Fewer bytes (3 k vs 4 k pairs) and a smaller alpha: every sparse group takes it.
  for (const omgs::Group& g : omgs::make_plan(Planner::mgs, layers, cheap, c).groups)
    CHECK(g.collective == p2p);
  for (const omgs::Group& g : omgs::make_plan(Planner::optimal, layers, dear, c).groups)
    CHECK(g.collective == Collective::sparse);
  // The closed loop's sparse-only view of the model knows it (it has a top-k).
  const omgs::detail::SparseOnlyModel sparse_only(cheap);
  CHECK(sparse_only.knows_collective("p2p_pairs", 4));
  CHECK(sparse_only.collective_s("p2p_pairs", 1000, 4, 0.01) ==
        cheap.collective_s("p2p_pairs", 1000, 4, 0.01));
  CHECK_FALSE(sparse_only.knows_collective("allreduce", 4));
  // The refit fits its groups on its own line, x its line's bytes.
  double x = 0.0;
  const char* line = omgs::detail::fit_line({0, 1, 1000, p2p}, 4, 0.01, {}, x);
  REQUIRE(line != nullptr);
  CHECK(std::string(line) == "p2p_pairs");
  CHECK(x == 3.0 * 10.0 * 8.0);
}

TEST_CASE("collective table: the two-level allreduce row is opt-in and timed by its own line",
          "[plan][table]") {
  const auto& row = collective_row(Collective::allreduce_node);
  CHECK(row.name == "allreduce_node");
  CHECK(row.line == "allreduce_node");
  CHECK((!row.sparsifies && !row.baseline));
  const std::uint64_t n = 10000;
  // Its bytes and memory are the flat allreduce's (the same buffers, 4-byte elements).
  CHECK(row.wire_bytes(n, 4, 0.01) == 60000.0);
  CHECK(row.memory_bytes(n, 4, 0.01) == 8.0 * 10000);
  CHECK(row.max_mpi_count(n, 4, 0.01) == 10000);
  // A model without the line does not know it; with a table or a formula it is alpha + beta
  // times the flat allreduce's bytes (n floats for a table, 2 (P-1)/P of them for a formula).
  omgs::AlphaBetaModel m = table_model();
  CHECK_FALSE(row.known(m, 4));
  CHECK_THROWS_WITH(row.time_s(m, n, 4, 0.01), Catch::Contains("\"allreduce_node\""));
  omgs::CollectiveCosts node;
  node.table[4] = {1e-5, 5e-10};
  m = m.with_line("allreduce_node", node);
  CHECK(row.known(m, 4));
  CHECK_FALSE(row.known(m, 8));
  CHECK(row.time_s(m, n, 4, 0.01) == Approx(1e-5 + 5e-10 * 4 * 10000).epsilon(1e-14));
  node.table.clear();
  node.has_formula = true;
  node.formula.alpha_s = 2e-5;
  node.formula.beta_s_per_byte = 1e-9;
  m = m.with_line("allreduce_node", node);
  CHECK(row.known(m, 8));
  CHECK(row.time_s(m, n, 8, 0.01) == Approx(2e-5 + 1e-9 * 2 * 7.0 / 8 * 4 * 10000).epsilon(1e-14));
  // Opt-in: no default set allows it, an explicit set does (the runtime's test plans with it).
  omgs::PlanConfig c;
  c.workers = 8;
  c.density = 0.01;
  for (auto e : {omgs::SparseExchange::allgather, omgs::SparseExchange::allreduce,
                 omgs::SparseExchange::automatic}) {
    c.sparse_exchange = e;
    CHECK_FALSE(omgs::allowed_collectives(c).contains(Collective::allreduce_node));
  }
  c.collectives = {Collective::sparse, Collective::dense, Collective::allreduce_node};
  CHECK(omgs::allowed_collectives(c).contains(Collective::allreduce_node));
  CHECK(omgs::parse_collective("allreduce_node") == Collective::allreduce_node);
}

namespace {
// A sparse allreduce whose start-up makes MGS merge every layer (a fast top-k, a slow
// start-up per exchange): with only that row allowed, k P grows with every merge.
class MergingSparseModel final : public omgs::PerfModel {
 public:
  double topk_s(std::uint64_t n) const override { return 1e-12 * static_cast<double>(n); }
  double allgather_s(std::uint64_t, int, double) const override { return 100.0; }
  void check_workers(int) const override {}
  std::string describe() const override { return "merging sparse test model"; }
  bool knows_sparse_allreduce(int) const override { return true; }
  double sparse_allreduce_s(std::uint64_t n, int, double) const override {
    return 1.0 + 1e-15 * static_cast<double>(n);
  }
};
}  // namespace

TEST_CASE("MGS merges no group past what its row can post when the run limits MPI counts",
          "[plan][table]") {
  const MergingSparseModel m;
  // k = 600,000 pairs a layer: at P = 1024, three layers' k P (1.84e9) fit an int, four not.
  std::vector<omgs::LayerSpec> layers;
  for (int l = 0; l < 7; ++l) layers.push_back({"l" + std::to_string(l), 600'000'000, 1e-3});
  omgs::PlanConfig c{1024, 0.001, 8192};
  c.sparse_exchange = omgs::SparseExchange::allreduce;
  c.max_mpi_count = 0;  // no limit (a prediction): the seed's MGS, one group
  const omgs::Plan free = omgs::make_plan(Planner::mgs, layers, m, c);
  REQUIRE(free.groups.size() == 1);
  CHECK(collective_row(free.groups[0].collective).max_mpi_count(free.groups[0].numel, 1024, 0.001) >
        INT_MAX);
  c.max_mpi_count = omgs::detail::mpi_int_count;  // as the runtime plans
  const omgs::Plan ints = omgs::make_plan(Planner::mgs, layers, m, c);
  CHECK(ints.groups.size() == 3);
  for (const omgs::Group& g : ints.groups) {
    CHECK(g.collective == Collective::sparse_allreduce);
    CHECK(collective_row(g.collective).max_mpi_count(g.numel, 1024, 0.001) <= INT_MAX);
  }
}
