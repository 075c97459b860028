#include <omgs/plan.hpp>

#include <limits>

#include "omgs_catch.hpp"
#include "plan/pipeline.hpp"
#include "test_support.hpp"

using omgs::Group;
using omgs::LayerSpec;

namespace {
// topk 0.25 s per element, allgather 1 s + 0.5 s per element: every number below is an
// exact binary fraction, so the expected values are exact.
const omgs_test::LinearModel model(0.25, 1.0, 0.5);
const std::vector<LayerSpec> layers = {{"L0", 2, 1.0}, {"L1", 1, 2.0}, {"L2", 4, 0.5}};
const omgs::PlanConfig config{4, 0.01, 8192};
}  // namespace

TEST_CASE("timeline of one group per layer, by hand", "[plan][timeline]") {
  const omgs::Timeline t = omgs::predict(layers, {{2, 3, 4}, {1, 2, 1}, {0, 1, 2}}, model, config);
  REQUIRE(t.groups.size() == 3);
  // L2: backward 0 .. 0.5, top-k .. 1.5, allgather 1.5 .. 4.5
  CHECK(t.groups[0].backward_start_s == 0.0);
  CHECK(t.groups[0].topk_start_s == 0.5);
  CHECK(t.groups[0].topk_end_s == 1.5);
  CHECK(t.groups[0].comm_start_s == 1.5);
  CHECK(t.groups[0].comm_end_s == 4.5);
  // L1: backward 1.5 .. 3.5, top-k .. 3.75, waits for the network until 4.5, ends 6
  CHECK(t.groups[1].backward_start_s == 1.5);
  CHECK(t.groups[1].topk_end_s == 3.75);
  CHECK(t.groups[1].comm_start_s == 4.5);
  CHECK(t.groups[1].comm_end_s == 6.0);
  // L0: backward 3.75 .. 4.75, top-k .. 5.25, allgather 6 .. 8
  CHECK(t.groups[2].topk_end_s == 5.25);
  CHECK(t.groups[2].comm_start_s == 6.0);
  CHECK(t.iteration_end_s == 8.0);
  CHECK(t.compute_end_s == 5.25);
  CHECK(t.non_overlapped_comm_s == 2.75);
  CHECK(t.comm_total_s == 6.5);
}

TEST_CASE("timeline of merged groups, by hand", "[plan][timeline]") {
  CHECK(omgs::predict(layers, {{0, 3, 7}}, model, config).iteration_end_s == 9.75);
  CHECK(omgs::predict(layers, {{1, 3, 5}, {0, 1, 2}}, model, config).iteration_end_s == 9.25);
  const omgs::Timeline t = omgs::predict(layers, {{2, 3, 4}, {0, 2, 3}}, model, config);
  CHECK(t.groups[1].backward_start_s == 1.5);
  CHECK(t.groups[1].topk_start_s == 4.5);
  CHECK(t.groups[1].comm_start_s == 5.25);  // the network was free since 4.5
  CHECK(t.iteration_end_s == 7.75);
}

TEST_CASE("pipeline_step: backward after the last top-k, comm after both", "[plan][timeline]") {
  using omgs::detail::pipeline_after;
  using omgs::detail::pipeline_step;
  // The network is busy until 4: the top-k ending at 3 waits for it.
  const omgs::GroupTiming waits = pipeline_step({1.0, 4.0}, 1.5, 0.5, 2.0);
  CHECK(waits.backward_start_s == 1.0);
  CHECK(waits.topk_start_s == 2.5);
  CHECK(waits.topk_end_s == 3.0);
  CHECK(waits.comm_start_s == 4.0);
  CHECK(waits.comm_end_s == 6.0);
  const omgs::detail::PipelineState next = pipeline_after(waits);
  CHECK(next.compute_end_s == 3.0);
  CHECK(next.comm_end_s == 6.0);
  // A free network: the communication starts at the end of the top-k; with no earlier
  // communication at all (-inf) likewise, also for a negative top-k end.
  CHECK(pipeline_step({1.0, 0.5}, 1.5, 0.5, 2.0).comm_start_s == 3.0);
  const double none = -std::numeric_limits<double>::infinity();
  CHECK(pipeline_step({0.0, none}, 0.0, -1.0, 1.0).comm_start_s == -1.0);
}

TEST_CASE("group_sums adds a group's layers from the highest down", "[plan][timeline]") {
  const omgs::detail::GroupSums sums = omgs::detail::group_sums(layers, {0, 2, 0});
  CHECK(sums.numel == 3);
  CHECK(sums.backward_s == 3.0);
  // 1e16 + 1 + 1 from the top: each 1 is lost; from the bottom they would add up to 2.
  const std::vector<LayerSpec> wide = {{"a", 1, 1.0}, {"b", 1, 1.0}, {"c", 1, 1e16}};
  CHECK(omgs::detail::group_sums(wide, {0, 3, 0}).backward_s == 1e16);
}

TEST_CASE("predict rejects groupings that are not a backward-order partition", "[plan][timeline]") {
  CHECK_THROWS_AS(omgs::predict(layers, {}, model, config), omgs::Error);
  CHECK_THROWS_AS(omgs::predict(layers, {{0, 1, 0}, {1, 3, 0}}, model, config), omgs::Error);
  CHECK_THROWS_AS(omgs::predict(layers, {{1, 3, 0}}, model, config), omgs::Error);
  CHECK_THROWS_AS(omgs::predict(layers, {{2, 3, 0}, {2, 2, 0}, {0, 2, 0}}, model, config),
                  omgs::Error);
}

TEST_CASE("make_plan_from_groups fills numel and group_of_layer", "[plan][timeline]") {
  const omgs::Plan p = omgs::make_plan_from_groups(omgs::Planner::layerwise, layers,
                                                   {{1, 3, 0}, {0, 1, 0}}, model, config);
  CHECK(p.groups[0].numel == 5);
  CHECK(p.groups[1].numel == 2);
  CHECK(p.group_of_layer == std::vector<std::size_t>{1, 0, 0});
  CHECK(p.predicted.iteration_end_s == 9.25);
  const std::string json = omgs::plan_to_json(p, layers, config);
  CHECK(json.find("\"groups\": [\n  [\"L2\", \"L1\"],\n  [\"L0\"]]") != std::string::npos);
  CHECK(json.find("\"iteration_end_s\": 9.25") != std::string::npos);
}

TEST_CASE("timeline_svg draws three lanes per group and escapes labels", "[plan][svg]") {
  omgs::Timeline t;
  t.groups.resize(2);
  t.groups[0] = {0.0, 1e-3, 2e-3, 2e-3, 4e-3};
  t.groups[1] = {2e-3, 3e-3, 3.5e-3, 4e-3, 6e-3};
  t.compute_end_s = 3.5e-3;
  t.iteration_end_s = 6e-3;
  t.non_overlapped_comm_s = 2.5e-3;
  const std::string svg =
      omgs::timeline_svg({{"predicted <a&b>", t}, {"measured", t}}, "title \"x\"");
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("predicted &lt;a&amp;b&gt;") != std::string::npos);
  CHECK(svg.find("title &quot;x&quot;") != std::string::npos);
  std::size_t bars = 0;
  for (std::size_t at = svg.find("<title>group "); at != std::string::npos;
       at = svg.find("<title>group ", at + 1))
    ++bars;
  CHECK(bars == 2 * 3 * 2);
  CHECK(svg.find("6.000 ms") != std::string::npos);  // the iteration, in the block caption
  // Degenerate input still gives a valid document.
  const std::string empty = omgs::timeline_svg({}, "");
  CHECK(empty.find("</svg>") != std::string::npos);
}

TEST_CASE("predict rejects a timeline whose sums overflow", "[plan][timeline]") {
  // Every time is finite, their sum is not.
  const std::vector<omgs::LayerSpec> layers = {{"a", 8, 1e307}, {"b", 8, 1e307}};
  const omgs::AlphaBetaModel model(omgs::TopkForm::linear, 1.7e308, 0.0, {{2, {0.0, 0.0}}});
  const omgs::PlanConfig config{2, 0.5, 8192};
  CHECK_THROWS_WITH(omgs::predict(layers, omgs::groups_layerwise(layers), model, config),
                    Catch::Contains("the predicted timeline overflows at group 0 (layers [1, 2))"));
  for (omgs::Planner p : omgs::all_planners())
    CHECK_THROWS_WITH(omgs::make_plan(p, layers, model, config), Catch::Contains("overflows"));
}
