// Node shapes in the model and the sweep (issue 45): the two-level lines equal their formulas
// computed by hand, G = 1 gives the flat sweep exactly, bad node shapes are refused with a
// message naming G and P, and on the shipped node shapes the sweep's mixed plan is never
// above the two-level dense baselines.
#include <cstdio>
#include <fstream>
#include <string>

#include <omgs/node_model.hpp>
#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

#include "omgs_catch.hpp"

using omgs::Collective;

namespace {

std::string source_path(const std::string& rel) {
  return std::string(OMGS_SOURCE_DIR) + "/" + rel;
}

// allgather 1e-5 log2 P + 1e-9 bytes, allreduce 2e-5 log2 P + 1e-9 bytes, top-k 1e-9 n.
omgs::AlphaBetaModel small_fabric() {
  omgs::CollectiveCosts ag, ar;
  ag.has_formula = ar.has_formula = true;
  ag.formula = {0.0, 1e-5, 0.0, 1e-9};
  ar.formula = {0.0, 2e-5, 0.0, 1e-9};
  return omgs::AlphaBetaModel(omgs::TopkForm::linear, 0.0, 1e-9, ag, ar);
}

const omgs::NodeShape four{4, {1e-6, 1e-10}};

}  // namespace

TEST_CASE("node model: the two-level lines by hand", "[plan][sweep][node]") {
  const omgs::NodeModel m(small_fabric(), four);
  // P = 16: N = 4 nodes; n = 1000: shards of 250.
  // allreduce_node: in the node 2 x (3 x 1e-6 + 3/4 x 4 x 1000 x 1e-10) = 6.6e-6; on the rail
  // 2e-5 log2 4 + 1e-9 x 2 x 3/4 x 4 x 250 = 4.15e-5.
  CHECK(m.collective_s("allreduce_node", 1000, 16, 0.01) == Approx(6.6e-6 + 4.15e-5));
  // sparse_node at d = 0.01: k_s = 3 pairs per shard. Reduce-scatter 3e-6 + 3e-7; top-k of
  // the shard 2.5e-7; the shard's pairs among 4 nodes 1e-5 log2 4 + 1e-9 x 3 x 3 x 8; shared
  // as pairs (4 x 3 x 8 = 96 bytes < 1000 as floats): 3e-6 + 3 x 96 x 1e-10.
  const double sparse = 3.3e-6 + 2.5e-7 + (2e-5 + 7.2e-8) + (3e-6 + 2.88e-8);
  CHECK(m.collective_s("sparse_node", 1000, 16, 0.01) == Approx(sparse));
  // Dense enough, the summed shard goes as floats: 4 x 250 x 8 > 4 x 250 bytes.
  const double floats = 3.3e-6 + 2.5e-7 + (2e-5 + 1e-9 * 3 * 250 * 8) + (3e-6 + 3 * 1000 * 1e-10);
  CHECK(m.collective_s("sparse_node", 1000, 16, 1.0) == Approx(floats));
  // The other lines are the fabric's; the rows are known where G divides P.
  CHECK(m.collective_s("allreduce", 1000, 16, 0.01) == small_fabric().allreduce_s(1000, 16));
  CHECK(m.knows_collective("allreduce_node", 16));
  CHECK(m.knows_collective("sparse_node", 4));
  CHECK_FALSE(m.knows_collective("allreduce_node", 6));
  CHECK_FALSE(m.knows_collective("sparse_node", 2));
  CHECK_THROWS_WITH(m.collective_s("allreduce_node", 1000, 6, 0.01),
                    Catch::Contains("4 ranks per node do not divide P = 6 workers"));
  CHECK_THAT(m.describe(), Catch::Contains("nodes of 4 ranks"));
}

TEST_CASE("node model: G = 1 is the flat model exactly", "[plan][sweep][node]") {
  const omgs::AlphaBetaModel fabric = small_fabric();
  const omgs::NodeModel m(fabric, {1, {1e-6, 1e-10}});
  for (int p : {1, 2, 7, 64, 4096})
    for (std::uint64_t n : {1, 1000, 123457})
      CHECK(m.collective_s("allreduce_node", n, p, 0.01) == fabric.allreduce_s(n, p));
  // The sweep with G = 1 is the flat sweep, bit for bit.
  const auto layers = omgs::load_model_csv(source_path("examples/models/resnet50.csv"));
  const auto model = omgs::AlphaBetaModel::load(source_path("examples/perf/dgx_h100.json"));
  omgs::OptimalBudget budget;
  budget.max_work = 1'000'000;
  const std::vector<int> workers = {2, 64, 4096};
  const auto flat = omgs::sweep_workers(layers, model, 0.001, workers, budget, 0.0);
  const auto one = omgs::sweep_workers(
      layers, model, 0.001, workers, budget, 0.0, omgs::SparseExchange::allgather, 0, 0,
      omgs::NodeShape{1, omgs::load_node_link(source_path("examples/perf/"
                                                          "dgx_h100.json"))});
  REQUIRE(one.size() == flat.size());
  for (std::size_t i = 0; i < flat.size(); ++i) {
    INFO("P = " << flat[i].workers);
    CHECK_FALSE(one[i].has_sparse_node);
    CHECK(one[i].ranks_per_node == 1);
    for (auto plan : {&omgs::SweepRow::dense, &omgs::SweepRow::dense_bf16, &omgs::SweepRow::mgs,
                      &omgs::SweepRow::optimal, &omgs::SweepRow::mixed}) {
      CHECK((one[i].*plan).predicted.iteration_end_s == (flat[i].*plan).predicted.iteration_end_s);
      CHECK((one[i].*plan).groups.size() == (flat[i].*plan).groups.size());
    }
  }
}

TEST_CASE("node model: bad node shapes are refused", "[plan][sweep][node]") {
  const std::vector<omgs::LayerSpec> layers = {{"a", 1000, 1e-3}, {"b", 100000, 2e-3}};
  const omgs::AlphaBetaModel fabric = small_fabric();
  auto sweep = [&](int g, std::vector<int> workers) {
    return omgs::sweep_workers(layers, fabric, 0.01, workers, {}, 0.0,
                               omgs::SparseExchange::allgather, 0, 0,
                               omgs::NodeShape{g, {1e-6, 1e-10}});
  };
  CHECK_THROWS_WITH(sweep(0, {8}), Catch::Contains("ranks per node = 0 (must be >= 1)"));
  CHECK_THROWS_WITH(sweep(-2, {8}), Catch::Contains("ranks per node = -2 (must be >= 1)"));
  CHECK_THROWS_WITH(sweep(8, {16, 12}),
                    Catch::Contains("8 ranks per node do not divide P = 12 workers"));
  CHECK_THROWS_WITH(omgs::sweep_workers(layers, omgs::ReferenceModel(), 0.01, {4}, {}, 0.0,
                                        omgs::SparseExchange::allgather, 0, 0, four),
                    Catch::Contains("a node shape needs an alpha-beta model"));
  CHECK_THROWS_WITH(omgs::NodeModel(fabric, {2, {1e-6, -1.0}}),
                    Catch::Contains("beta_s_per_byte = -1 (must be finite and >= 0)"));
  CHECK_NOTHROW(sweep(4, {4, 8}));
  // The link in a fabric file: read, or its absence named.
  const omgs::AlphaBeta dgx = omgs::load_node_link(source_path("examples/perf/dgx_h100.json"));
  CHECK(dgx.alpha_s == 1e-6);
  CHECK(dgx.beta_s_per_byte == Approx(1.0 / 450e9));
  CHECK_THROWS_WITH(omgs::load_node_link(source_path("examples/perf/ethernet_10g.json")),
                    Catch::Contains("ethernet_10g.json: no \"node_link\" member"));
  const std::string bad = "node_link_bad.json";
  std::ofstream(bad) << "{\"type\": \"alpha_beta\",\n \"node_link\": {\"alpha_s\": 1e-6}}\n";
  CHECK_THROWS_WITH(omgs::load_node_link(bad),
                    Catch::Contains("node_link: missing member \"beta_s_per_byte\""));
  std::remove(bad.c_str());
}

TEST_CASE("node sweep: the shipped node shapes", "[plan][sweep][node]") {
  omgs::OptimalBudget budget;
  budget.max_work = 1'000'000;
  const auto layers = omgs::load_model_csv(source_path("examples/models/gpt2_small.csv"));
  const struct {
    const char* file;
    int g;
  } shapes[] = {{"dgx_h100", 8}, {"frontier", 8}, {"aurora", 6}, {"perlmutter", 4}};
  for (const auto& s : shapes) {
    const std::string path = source_path(std::string("examples/perf/") + s.file + ".json");
    const auto model = omgs::AlphaBetaModel::load(path);
    const omgs::NodeShape node{s.g, omgs::load_node_link(path)};
    const std::vector<int> workers = {s.g, 64 * s.g, 512 * s.g};
    const auto rows = omgs::sweep_workers(layers, model, 0.001, workers, budget, 0.0,
                                          omgs::SparseExchange::automatic, 0, 0, node);
    const auto flat = omgs::sweep_workers(layers, model, 0.001, workers, budget, 0.0,
                                          omgs::SparseExchange::automatic);
    bool node_rows = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const omgs::SweepRow& r = rows[i];
      INFO(s.file << ", P = " << r.workers);
      REQUIRE(r.has_sparse_node);
      CHECK(r.ranks_per_node == s.g);
      const double mixed = r.mixed.predicted.iteration_end_s;
      CHECK(mixed <= r.dense.predicted.iteration_end_s);
      CHECK(mixed <= r.optimal.predicted.iteration_end_s);
      // The two-level dense baseline is never above the flat one (it may take either form).
      CHECK(r.dense.predicted.iteration_end_s <= flat[i].dense.predicted.iteration_end_s);
      CHECK(r.dense_bf16.predicted.iteration_end_s <= flat[i].dense_bf16.predicted.iteration_end_s);
      for (const omgs::Group& g : r.dense.groups)
        CHECK((g.collective == Collective::dense || g.collective == Collective::allreduce_node));
      for (const omgs::Group& g : r.sparse_node.groups)
        CHECK(g.collective == Collective::sparse_node);
      for (const omgs::Group& g : r.mixed.groups)
        node_rows = node_rows || g.collective == Collective::allreduce_node ||
                    g.collective == Collective::sparse_node;
    }
    // The planner chooses a two-level row somewhere without being told.
    CHECK(node_rows);
  }
}
