// The closed loop's fit (src/plan/timeline_fit.hpp): known costs recovered from synthetic
// timelines, without MPI or Kokkos.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "plan/timeline_fit.hpp"

using omgs::detail::fit_timelines;
using omgs::detail::group_costs;
using omgs::detail::TimelineFit;

namespace {

// The fit's prior: the top-k's line and the lines by collective name.
omgs::detail::FittedModel prior(omgs::detail::LinearFit topk,
                                std::map<std::string, omgs::detail::LinearFit> lines = {}) {
  omgs::detail::FittedModel m;
  m.topk = topk;
  for (const auto& [name, fit] : lines) m.lines[name].fit = fit;
  return m;
}

std::vector<omgs::LayerSpec> layers_of(std::size_t L) {
  std::vector<omgs::LayerSpec> layers;
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint64_t> numel(1000, 4000000);
  for (std::size_t l = 0; l < L; ++l)
    layers.push_back({"l" + std::to_string(l), numel(rng), 1e-4 * static_cast<double>(l % 5)});
  return layers;
}

// The model the "run" pays: 80 us per group plus 2 ns per element for top-k; 300 us plus
// 1 ns per byte (1 GB/s) for the allgather of 4 workers.
const omgs::AlphaBetaModel truth(omgs::TopkForm::linear, 80e-6, 2e-9,
                                 std::map<int, omgs::AlphaBeta>{{4, {300e-6, 1e-9}}});
const omgs::PlanConfig config{4, 0.01, 8192};

}  // namespace

TEST_CASE("group_costs reads the timeline model's terms back", "[plan][fit][closed-loop]") {
  const auto layers = layers_of(6);
  const omgs::Plan p = omgs::make_plan(omgs::Planner::layerwise, layers, truth, config);
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const auto c = group_costs(p.predicted, g);
    CHECK(c.sparsify_s == Approx(truth.topk_s(p.groups[g].numel)).epsilon(1e-9));
    CHECK(c.allgather_s == Approx(truth.allgather_s(p.groups[g].numel, 4, 0.01)).epsilon(1e-9));
    CHECK(c.backward_s == Approx(layers[p.groups[g].begin].backward_s).margin(1e-15));
  }
}

TEST_CASE("the fit recovers known top-k and allgather costs from timelines",
          "[plan][fit][closed-loop]") {
  const auto layers = layers_of(40);
  const omgs::Plan p = omgs::make_plan(omgs::Planner::layerwise, layers, truth, config);
  // Seven iterations; two of them are disturbed (a slow top-k, a slow network): the median
  // per group ignores them.
  std::vector<omgs::Timeline> runs(7, p.predicted);
  for (auto& g : runs[2].groups) g.topk_end_s += 0.05;
  for (auto& g : runs[5].groups) g.comm_end_s += 0.02;
  const TimelineFit f = fit_timelines(p.groups, runs.data(), runs.size(), 4, 0.01, {});
  CHECK(f.sizes == 40);
  CHECK(f.intercepts_fitted);
  CHECK(f.topk.c0 == Approx(80e-6).epsilon(1e-6));
  CHECK(f.topk.c1 == Approx(2e-9).epsilon(1e-6));
  CHECK(f.line("allgather").c0 == Approx(300e-6).epsilon(1e-6));
  CHECK(f.line("allgather").c1 == Approx(1e-9).epsilon(1e-6));
}

TEST_CASE("the fit survives noise on every point", "[plan][fit][closed-loop]") {
  const auto layers = layers_of(60);
  const omgs::Plan p = omgs::make_plan(omgs::Planner::layerwise, layers, truth, config);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> jitter(1.0, 1.1);  // measured costs are 0-10% high
  std::vector<omgs::Timeline> runs(5);
  for (auto& run : runs) {
    // Each group's costs scaled by its own factor, laid out as the run would (serialized).
    run = p.predicted;
    double compute = 0, comm = 0;
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      const auto c = group_costs(p.predicted, g);
      auto& t = run.groups[g];
      t.backward_start_s = compute;
      t.topk_start_s = compute + c.backward_s;
      t.topk_end_s = t.topk_start_s + c.sparsify_s * jitter(rng);
      t.comm_start_s = t.topk_end_s;
      t.comm_end_s = std::max(comm, t.topk_end_s) + c.allgather_s * jitter(rng);
      compute = t.topk_end_s;
      comm = t.comm_end_s;
    }
  }
  const TimelineFit f = fit_timelines(p.groups, runs.data(), runs.size(), 4, 0.01, {});
  CHECK(f.topk.c0 == Approx(80e-6 * 1.05).epsilon(0.08));
  CHECK(f.topk.c1 == Approx(2e-9 * 1.05).epsilon(0.08));
  CHECK(f.line("allgather").c0 == Approx(300e-6 * 1.05).epsilon(0.08));
  CHECK(f.line("allgather").c1 == Approx(1e-9 * 1.05).epsilon(0.08));
}

TEST_CASE("one group: the intercepts come from the prior, the slopes are fitted",
          "[plan][fit][closed-loop]") {
  const auto layers = layers_of(10);
  const omgs::Plan p = omgs::make_plan(omgs::Planner::single, layers, truth, config);
  std::vector<omgs::Timeline> runs(3, p.predicted);
  const TimelineFit f = fit_timelines(p.groups, runs.data(), runs.size(), 4, 0.01,
                                      prior({80e-6, 0.0}, {{"allgather", {300e-6, 0.0}}}));
  CHECK(f.sizes == 1);
  CHECK_FALSE(f.intercepts_fitted);
  CHECK(f.topk.c0 == 80e-6);
  CHECK(f.topk.c1 == Approx(2e-9).epsilon(1e-9));
  CHECK(f.line("allgather").c0 == 300e-6);
  CHECK(f.line("allgather").c1 == Approx(1e-9).epsilon(1e-9));
  // A prior above the measured cost is capped at it (the slope cannot go negative).
  const TimelineFit g = fit_timelines(p.groups, runs.data(), 1, 4, 0.01,
                                      prior({1.0, 0.0}, {{"allgather", {1.0, 0.0}}}));
  CHECK(g.topk.c0 == Approx(truth.topk_s(p.groups[0].numel)));
  CHECK(g.topk.c1 == 0.0);
}

TEST_CASE("a fitted model plans: the closed loop's mgs equals mgs on the true model",
          "[plan][fit][closed-loop]") {
  const auto layers = layers_of(30);
  const omgs::Plan lw = omgs::make_plan(omgs::Planner::layerwise, layers, truth, config);
  std::vector<omgs::Timeline> runs(3, lw.predicted);
  const TimelineFit f = fit_timelines(lw.groups, runs.data(), runs.size(), 4, 0.01, {});
  const omgs::AlphaBetaModel fitted(omgs::TopkForm::linear, f.topk.c0, f.topk.c1,
                                    {{4, {f.line("allgather").c0, f.line("allgather").c1}}});
  const omgs::Plan a = omgs::make_plan(omgs::Planner::mgs, layers, fitted, config);
  const omgs::Plan b = omgs::make_plan(omgs::Planner::mgs, layers, truth, config);
  REQUIRE(a.groups.size() == b.groups.size());
  for (std::size_t g = 0; g < a.groups.size(); ++g) CHECK(a.groups[g].begin == b.groups[g].begin);
  CHECK(a.predicted.iteration_end_s == Approx(b.predicted.iteration_end_s).epsilon(1e-6));
}

TEST_CASE("near-zero points do not decide the line: the plan's measured costs are kept",
          "[plan][fit][closed-loop]") {
  // The window of VGG-16 on 4 emulated hosts at 1 Gbit/s (mgs, 6 groups, density 0.001):
  // two allgathers completed behind the previous one (charged ~10 us). In relative error
  // they made beta 0 and the top-k line 40% low for the 130M-element group.
  const std::vector<std::uint64_t> numel = {130722792, 5899520, 590080, 885120, 221376, 38656};
  omgs::detail::GroupPoints p;
  p.sparsify_s = {2.89e-01, 2.68e-02, 9.35e-04, 1.11e-03, 3.79e-04, 2.94e-04};
  p.allgather_s = {9.51e-02, 9.39e-06, 1.44e-02, 1.90e-05, 9.61e-03, 1.54e-02};
  std::vector<omgs::Group> groups;
  std::size_t end = numel.size();
  for (std::uint64_t n : numel) {
    groups.push_back({end - 1, end, n, omgs::Collective::sparse});
    --end;
  }
  const TimelineFit f = omgs::detail::fit_points(groups, p, 4, 0.001, {});
  double topk = 0, topk_measured = 0, allgather = 0, allgather_measured = 0;
  for (std::size_t g = 0; g < numel.size(); ++g) {
    const double bytes = omgs::AlphaBetaModel::bytes_received(numel[g], 4, 0.001);
    topk += f.topk.c0 + f.topk.c1 * static_cast<double>(numel[g]);
    allgather += f.line("allgather").c0 + f.line("allgather").c1 * bytes;
    topk_measured += p.sparsify_s[g];
    allgather_measured += p.allgather_s[g];
  }
  CHECK(f.line("allgather").c1 > 0);
  CHECK(topk == Approx(topk_measured).epsilon(0.1));
  CHECK(allgather == Approx(allgather_measured).epsilon(0.1));
  CHECK(f.topk.c0 + f.topk.c1 * 130722792.0 == Approx(0.289).epsilon(0.1));
}

TEST_CASE("the fit keeps the sparse allreduce's groups on their own line",
          "[plan][fit][closed-loop][sparse_exchange]") {
  // Every other group exchanged by the sparse allreduce (500 us + 3 ns per wire byte): the
  // top-k is fitted over both kinds, each exchange on its own bytes.
  omgs::CollectiveCosts sar;
  sar.table[4] = {500e-6, 3e-9};
  const omgs::AlphaBetaModel model = truth.with_sparse_allreduce(sar);
  const auto layers = layers_of(40);
  std::vector<omgs::Group> groups =
      omgs::make_plan(omgs::Planner::layerwise, layers, truth, config).groups;
  for (std::size_t g = 0; g < groups.size(); g += 2)
    groups[g].collective = omgs::Collective::sparse_allreduce;
  const omgs::Timeline t = omgs::predict(layers, groups, model, config);
  const auto points = omgs::detail::group_medians(groups.size(), &t, 1);
  const TimelineFit f = omgs::detail::fit_points(groups, points, 4, 0.01, {});
  CHECK(f.groups("sparse_allreduce") == 20);
  CHECK(f.topk.c0 == Approx(80e-6).epsilon(1e-6));
  CHECK(f.topk.c1 == Approx(2e-9).epsilon(1e-6));
  CHECK(f.line("allgather").c0 == Approx(300e-6).epsilon(1e-6));
  CHECK(f.line("allgather").c1 == Approx(1e-9).epsilon(1e-6));
  CHECK(f.line("sparse_allreduce").c0 == Approx(500e-6).epsilon(1e-6));
  CHECK(f.line("sparse_allreduce").c1 == Approx(3e-9).epsilon(1e-6));
  // Without such groups the prior stays; with only them, the allgather's prior stays.
  const auto sparse_only = omgs::make_plan(omgs::Planner::layerwise, layers, truth, config).groups;
  const omgs::Timeline ts = omgs::predict(layers, sparse_only, truth, config);
  const TimelineFit g =
      omgs::detail::fit_points(sparse_only, omgs::detail::group_medians(sparse_only.size(), &ts, 1),
                               4, 0.01, prior({}, {{"sparse_allreduce", {7e-6, 8e-9}}}));
  CHECK(g.groups("sparse_allreduce") == 0);
  CHECK(g.line("sparse_allreduce").c0 == 7e-6);
  CHECK(g.line("sparse_allreduce").c1 == 8e-9);
  for (omgs::Group& gr : groups) gr.collective = omgs::Collective::sparse_allreduce;
  const omgs::Timeline ta = omgs::predict(layers, groups, model, config);
  const TimelineFit h =
      omgs::detail::fit_points(groups, omgs::detail::group_medians(groups.size(), &ta, 1), 4, 0.01,
                               prior({}, {{"allgather", {1e-5, 2e-9}}}));
  CHECK(h.line("allgather").c0 == 1e-5);
  CHECK(h.line("allgather").c1 == 2e-9);
  CHECK(h.line("sparse_allreduce").c1 == Approx(3e-9).epsilon(1e-6));
  // Measured with the compact pair format (3.9 bytes per pair): fitted on its bytes, the
  // same line comes back.
  const omgs::Timeline tc = omgs::predict(layers, groups, model.with_pair_bytes(3.9), config);
  const TimelineFit c = omgs::detail::fit_points(
      groups, omgs::detail::group_medians(groups.size(), &tc, 1), 4, 0.01, {}, {4.0, 3.9});
  CHECK(c.line("sparse_allreduce").c0 == Approx(500e-6).epsilon(1e-6));
  CHECK(c.line("sparse_allreduce").c1 == Approx(3e-9).epsilon(1e-6));
}

TEST_CASE("fitted lines by name: one per collective of the plan, packed in a fixed order",
          "[plan][fit][closed-loop]") {
  const auto layers = layers_of(20);
  std::vector<omgs::Group> groups =
      omgs::make_plan(omgs::Planner::layerwise, layers, truth, config).groups;
  const omgs::Timeline t = omgs::predict(layers, groups, truth, config);
  // An all-allgather plan fits the allgather's line only; the prior's other lines stay.
  const TimelineFit f =
      omgs::detail::fit_points(groups, omgs::detail::group_medians(groups.size(), &t, 1), 4, 0.01,
                               prior({}, {{"sparse_allreduce", {7e-6, 8e-9}}}));
  REQUIRE(f.lines.size() == 2);
  CHECK(f.groups("allgather") == groups.size());
  CHECK(f.groups("sparse_allreduce") == 0);
  CHECK(f.line("sparse_allreduce").c1 == 8e-9);
  CHECK(f.line("no_such_line").c0 == 0.0);
  // A dense group is a point of the dense allreduce's line, on its gradient bytes in the
  // form in force (2 bytes per element in a 16-bit one).
  double x = -1.0;
  omgs::Group dense = groups[0];
  dense.collective = omgs::Collective::dense;
  REQUIRE(omgs::detail::fit_line(dense, 4, 0.01, {2.0, 8.0}, x) != nullptr);
  CHECK(std::string(omgs::detail::fit_line(dense, 4, 0.01, {2.0, 8.0}, x)) == "allreduce");
  CHECK(x == 2.0 * static_cast<double>(dense.numel));
  CHECK(std::string(omgs::detail::fit_line(groups[0], 4, 0.01, {}, x)) == "allgather");
  CHECK(x == omgs::AlphaBetaModel::bytes_received(groups[0].numel, 4, 0.01));

  // pack(): the top-k, then c0, c1 and groups of each line in name order; unpack() back.
  omgs::detail::FittedModel m{f.topk, f.lines};
  std::vector<double> v = m.pack();
  REQUIRE(v.size() == 2 + 3 * 2);
  CHECK(v[0] == f.topk.c0);
  CHECK(v[2] == f.line("allgather").c0);
  CHECK(v[4] == static_cast<double>(groups.size()));
  CHECK(v[5] == 7e-6);
  v[6] = 1.0;  // another rank's larger slope
  m.unpack(v);
  CHECK(m.find("sparse_allreduce")->fit.c1 == 1.0);
  CHECK(m.find("allgather")->groups == groups.size());
  CHECK(m.find("allreduce") == nullptr);
  v.pop_back();
  CHECK_THROWS_AS(m.unpack(v), omgs::Error);
}

TEST_CASE("the fit corrects the dense allreduce's line from the plan's dense groups",
          "[plan][fit][closed-loop]") {
  // The run's dense allreduce costs 200 us + 2 ns per byte; the prior (a calibration
  // extrapolated past its sizes, or the 2-host latency artifact) has it 5x and 40x off.
  // Every other group dense: fitted on their own bytes, the true line comes back, and the
  // top-k is fitted on the sparse groups only.
  omgs::CollectiveCosts dense_truth;
  dense_truth.table[4] = {200e-6, 2e-9};
  const omgs::AlphaBetaModel model = truth.with_line("allreduce", dense_truth);
  const auto layers = layers_of(40);
  std::vector<omgs::Group> groups =
      omgs::make_plan(omgs::Planner::layerwise, layers, truth, config).groups;
  for (std::size_t g = 0; g < groups.size(); g += 2) groups[g].collective = omgs::Collective::dense;
  const omgs::Timeline t = omgs::predict(layers, groups, model, config);
  const auto points = omgs::detail::group_medians(groups.size(), &t, 1);
  const TimelineFit f =
      omgs::detail::fit_points(groups, points, 4, 0.01, prior({}, {{"allreduce", {8e-3, 1e-8}}}));
  CHECK(f.groups("allreduce") == 20);
  CHECK(f.groups("allgather") == 20);
  CHECK(f.line("allreduce").c0 == Approx(200e-6).epsilon(1e-6));
  CHECK(f.line("allreduce").c1 == Approx(2e-9).epsilon(1e-6));
  CHECK(f.topk.c0 == Approx(80e-6).epsilon(1e-6));
  CHECK(f.topk.c1 == Approx(2e-9).epsilon(1e-6));
  // One dense size only: the slope through the prior's intercept, capped at the measured
  // time (the 8 ms latency of the prior cannot stay above what the group took).
  std::vector<omgs::Group> one =
      omgs::make_plan(omgs::Planner::single, layers, truth, config).groups;
  REQUIRE(one.size() == 1);
  one[0].collective = omgs::Collective::dense;
  const omgs::Timeline t1 = omgs::predict(layers, one, model, config);
  const TimelineFit g = omgs::detail::fit_points(one, omgs::detail::group_medians(1, &t1, 1), 4,
                                                 0.01, prior({}, {{"allreduce", {8e-3, 1e-8}}}));
  const double bytes = 4.0 * static_cast<double>(one[0].numel);
  const double measured = model.allreduce_s(one[0].numel, 4);
  CHECK(g.line("allreduce").c0 <= measured);
  CHECK(g.line("allreduce").c0 + g.line("allreduce").c1 * bytes == Approx(measured).epsilon(1e-9));
  // In a 16-bit form the points are fitted on 2 bytes per element: the per-byte line of
  // that form comes back.
  const omgs::Timeline th =
      omgs::predict(layers, groups, model.with_allreduce_element_bytes(2.0), config);
  const TimelineFit h = omgs::detail::fit_points(
      groups, omgs::detail::group_medians(groups.size(), &th, 1), 4, 0.01, {}, {2.0, 8.0});
  CHECK(h.line("allreduce").c0 == Approx(200e-6).epsilon(1e-6));
  CHECK(h.line("allreduce").c1 == Approx(2e-9).epsilon(1e-6));
}
