// The runtime's allgather groups with their posts split (issue 48, docs/comm.md "Large
// counts"): with a test-lowered limit on the pairs per MPI call (set_max_post_count), the
// 8-byte pairs and a compact pair wire (bf16) give aggregates and residuals equal bit for bit
// to the unsplit exchange's, over several iterations, on 1, 2, 3, 4 and 8 ranks.
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "comm/wire.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs::PairWire;
using omgs_test::to_host;
using omgs_test::world_rank;

namespace {

std::string model_path() {
  static const std::string path =
      omgs_test::any_p_allgather_model("omgs_test_large_count_runtime_perf.json");
  return path;
}

float value(int rank, int it, std::size_t l, std::size_t i) {
  return std::sin(0.37f * float(i) + 1.3f * float(rank) + 0.7f * float(it) + float(l)) *
         (1.0f + float(i % 97));
}

/// Three iterations of layer-wise allgather groups: every layer's aggregate and residual.
std::vector<std::vector<float>> run(PairWire wire) {
  omgs::RuntimeOptions opt;
  opt.density = 0.01;
  opt.perf_model = model_path();
  opt.planner = omgs::Planner::layerwise;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.pair_wire = wire;
  const std::vector<omgs::LayerSpec> layers = {
      {"big", 30000, 1e-4}, {"mid", 12000, 1e-4}, {"small", 900, 1e-4}};
  auto rt = std::make_unique<omgs::Runtime>(MPI_COMM_WORLD, layers, opt);
  std::vector<std::vector<float>> out;
  for (int it = 0; it < 3; ++it) {
    for (std::size_t l = 0; l < layers.size(); ++l) {
      std::vector<float> g(layers[l].numel);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(world_rank(), it, l, i);
      omgs_test::copy_to(rt->gradient(l), g);
    }
    for (std::size_t l = layers.size(); l-- > 0;) REQUIRE(rt->ready(l) == omgs::Status::ok);
    REQUIRE(rt->finish().status == omgs::Status::ok);
    for (std::size_t l = 0; l < layers.size(); ++l) {
      out.push_back(to_host(rt->aggregated(l)));
      out.push_back(to_host(rt->residual(l)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("runtime: allgather groups split over posts equal the unsplit ones",
          "[runtime][large_count]") {
  for (PairWire wire : {PairWire::pairs8, PairWire::bf16}) {
    INFO(omgs::to_string(wire));
    omgs::detail::set_max_post_count(0);
    const auto whole = run(wire);
    // 300 pairs of the big layer per rank: 97 cuts every rank's block, 1000 fits several.
    for (const std::uint64_t limit : {97u, 1000u}) {
      INFO("limit " << limit);
      omgs::detail::set_max_post_count(limit);
      const auto split = run(wire);
      omgs::detail::set_max_post_count(0);
      REQUIRE(split.size() == whole.size());
      for (std::size_t x = 0; x < whole.size(); ++x) {
        REQUIRE(split[x].size() == whole[x].size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < whole[x].size(); ++i)
          differ +=
              split[x][i] != whole[x][i] && !(std::isnan(split[x][i]) && std::isnan(whole[x][i]));
        CHECK(differ == 0);
      }
    }
  }
}
