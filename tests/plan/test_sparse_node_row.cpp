// The sparse node-summed row of the planner's table (Collective::sparse_node, issue 45): its
// bytes and memory by hand, timed only by the model's own "sparse_node" line (a table per P
// or a formula, read from JSON too, on the group's n floats), opt-in, and planned by mgs_mixed
// and the optimal search where its line is cheaper than the dense allreduce's, never where it
// is dearer or not allowed.
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "plan/collective_table.hpp"

using omgs::Collective;
using omgs::Planner;
using omgs::detail::collective_row;
using omgs_test::count_collective;

namespace {

// Allgather and allreduce formulas (the top-k costs 1 ns an element) and, for
// node_alpha_s >= 0, a sparse_node formula node_alpha_s + 1e-10 x 4 n.
omgs::AlphaBetaModel model_with(double node_alpha_s) {
  std::string json = R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
          "allgather": [], "allgather_formula": {"alpha_s": 2e-4, "beta_s_per_byte": 1e-9},
          "allreduce_formula": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9})";
  if (node_alpha_s >= 0)
    json += R"(, "sparse_node_formula": {"alpha_s": )" + std::to_string(node_alpha_s) +
            R"(, "beta_s_per_byte": 1e-10})";
  return omgs::AlphaBetaModel::from_json(json + "}");
}

std::vector<omgs::LayerSpec> layers() {
  return {{"a", 100000, 1e-3}, {"b", 2000, 1e-4}, {"c", 300000, 2e-3}, {"d", 50, 1e-5}};
}

}  // namespace

TEST_CASE("sparse_node row: bytes, memory, its own line", "[plan][table][sparse_node]") {
  const auto& row = collective_row(Collective::sparse_node);
  CHECK(row.name == "sparse_node");
  CHECK(row.line == "sparse_node");
  CHECK(omgs::parse_collective("sparse_node") == Collective::sparse_node);
  // Its top-k runs inside the exchange (on the host), not on the compute stream.
  CHECK((!row.sparsifies && !row.baseline));
  const std::uint64_t n = 10000;  // k = 100 at density 0.01
  CHECK(row.wire_bytes(n, 8, 0.01) == 4.0 * 10000 + 8.0 * 100);
  CHECK(row.memory_bytes(n, 8, 0.01) == 24.0 * 10000);
  CHECK(row.max_mpi_count(n, 8, 0.01) == n);
  omgs::AlphaBetaModel m = model_with(-1);
  CHECK_FALSE(row.known(m, 8));
  CHECK_THROWS_WITH(row.time_s(m, n, 8, 0.01), Catch::Contains("\"sparse_node\""));
  omgs::CollectiveCosts node;
  node.table[8] = {1e-5, 5e-10};
  m = m.with_line("sparse_node", node);
  CHECK(row.known(m, 8));
  CHECK_FALSE(row.known(m, 4));
  CHECK(row.time_s(m, n, 8, 0.01) == Approx(1e-5 + 5e-10 * 4 * 10000).epsilon(1e-14));
  // From JSON: the formula's bytes are the same n floats, at any P.
  const omgs::AlphaBetaModel j = model_with(3e-5);
  CHECK(row.known(j, 64));
  CHECK(row.time_s(j, n, 64, 0.01) == Approx(3e-5 + 1e-10 * 4 * 10000).epsilon(1e-14));
}

TEST_CASE("sparse_node row: opt-in, planned where its line is cheapest",
          "[plan][table][sparse_node]") {
  omgs::PlanConfig c{8, 0.01, 8192};
  for (auto e : {omgs::SparseExchange::allgather, omgs::SparseExchange::allreduce,
                 omgs::SparseExchange::automatic}) {
    c.sparse_exchange = e;
    CHECK_FALSE(omgs::allowed_collectives(c).contains(Collective::sparse_node));
  }
  omgs::PlanConfig with = c;
  with.collectives = {Collective::sparse, Collective::dense, Collective::sparse_node};
  const omgs::AlphaBetaModel cheap = model_with(1e-6), dear = model_with(1.0);
  for (Planner p : {Planner::mgs_mixed, Planner::optimal, Planner::mixed}) {
    INFO(omgs::to_string(p));
    CHECK(count_collective(omgs::make_plan(p, layers(), cheap, with).groups,
                           Collective::sparse_node) >= 1);
    CHECK(count_collective(omgs::make_plan(p, layers(), dear, with).groups,
                           Collective::sparse_node) == 0);
    CHECK(count_collective(omgs::make_plan(p, layers(), cheap, c).groups,
                           Collective::sparse_node) == 0);
  }
  // A model without its line: allowed, but never chosen.
  CHECK(count_collective(omgs::make_plan(Planner::mgs_mixed, layers(), model_with(-1), with).groups,
                         Collective::sparse_node) == 0);
}
