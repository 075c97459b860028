// The sparse node-summed exchange in the runtime (Collective::sparse_node, issue 45), on 1 to
// 8 ranks in 1 to 4 nodes (RuntimeOptions::ranks_per_node G = 1, 2, 4): opt-in, chosen by
// mgs_mixed where its line is cheapest; over several iterations every rank's aggregate and
// residual equal a reference simulated here from every rank's gradients (small integers, so
// every sum is exact: gradient + residual summed in the node, each shard's top-k with ties to
// the lower index, the rest kept by the shard's owner); mass conserved; a NaN on one rank
// fails the group on every rank, each healthy rank's gradient kept in its residual.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs_test::count_collective;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> layers() {
  return {{"l0", 2001, 1e-4}, {"l1", 12, 1e-4}, {"l2", 3003, 1e-4}, {"l3", 1, 1e-4}};
}

std::string write_model() {
  return omgs_test::write_on_rank0(
      "omgs_test_sparse_node_groups_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-6},
          "allgather": [], "allgather_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-12},
          "allreduce_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-12},
          "sparse_node_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-12}})");
}

omgs::RuntimeOptions options(const std::string& perf, int ranks_per_node, bool allow) {
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = omgs::Planner::mgs_mixed;
  opt.perf_model = perf;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  opt.ranks_per_node = ranks_per_node;
  if (allow)
    opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense,
                       omgs::Collective::sparse_node};
  return opt;
}

float grad_value(int rank, int it, std::size_t l, std::size_t i) {
  return float(int((std::size_t(rank) * 31 + i * 17 + l * 7 + std::size_t(it) * 13) % 23) - 11);
}

void fill(omgs::Runtime& rt, int it) {
  for (std::size_t l = 0; l < rt.layers().size(); ++l) {
    std::vector<float> g(rt.layers()[l].numel);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = grad_value(world_rank(), it, l, i);
    omgs_test::copy_to(rt.gradient(l), g);
  }
}

void backward(omgs::Runtime& rt) {
  for (std::size_t l = rt.layers().size(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
}

/// One group's exchange on every rank, simulated: resid[r] (the group's elements) becomes what
/// rank r keeps; returns the sum every rank receives.
std::vector<float> simulate(std::vector<std::vector<float>>& resid,
                            const std::vector<std::vector<float>>& grad, std::size_t k, int G) {
  const int P = int(resid.size());
  const std::size_t n = grad[0].size();
  std::vector<float> sum(n, 0.0f);
  for (int node = 0; node < P / G; ++node) {
    std::vector<float> s(n, 0.0f);
    for (int r = node * G; r < (node + 1) * G; ++r)
      for (std::size_t i = 0; i < n; ++i)
        s[i] += resid[std::size_t(r)][i] + grad[std::size_t(r)][i];
    std::size_t begin = 0;
    for (int l = 0; l < G; ++l) {
      const std::size_t size = n / std::size_t(G) + (std::size_t(l) < n % std::size_t(G) ? 1 : 0);
      const std::size_t ks =
          size == 0 ? 0 : std::min(size, std::max<std::size_t>(1, (k * size + n - 1) / n));
      std::vector<std::size_t> idx(size);
      std::iota(idx.begin(), idx.end(), begin);
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        return std::fabs(s[a]) > std::fabs(s[b]);
      });
      std::vector<float>& keep = resid[std::size_t(node * G + l)];
      std::fill(keep.begin(), keep.end(), 0.0f);
      for (std::size_t j = 0; j < size; ++j) (j < ks ? sum[idx[j]] : keep[idx[j]]) += s[idx[j]];
      begin += size;
    }
  }
  return sum;
}

/// A group's elements (its layers' in order) of rank r at iteration it.
std::vector<float> group_grad(const omgs::Runtime& rt, const omgs::Group& gr, int r, int it) {
  std::vector<float> g;
  for (std::size_t l = gr.begin; l < gr.end; ++l)
    for (std::size_t i = 0; i < rt.layers()[l].numel; ++i) g.push_back(grad_value(r, it, l, i));
  return g;
}

std::vector<float> group_view(const omgs::Runtime& rt, const omgs::Group& gr, bool residual) {
  std::vector<float> out;
  for (std::size_t l = gr.begin; l < gr.end; ++l) {
    const auto v = to_host(residual ? rt.residual(l) : rt.aggregated(l));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST_CASE("sparse node-summed groups: opt-in, the reference's update and residuals",
          "[runtime][sparse_node]") {
  const std::string perf = write_model();
  const int P = world_size(), me = world_rank();
  const int G = GENERATE(1, 2, 4);
  if (G > P || P % G != 0) return;
  CAPTURE(P, G);
  {
    omgs::Runtime flat(MPI_COMM_WORLD, layers(), options(perf, G, false));
    CHECK(count_collective(flat.plan().groups, omgs::Collective::sparse_node) == 0);
  }
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(perf, G, true));
  const std::vector<omgs::Group> groups = rt.plan().groups;
  REQUIRE(count_collective(groups, omgs::Collective::sparse_node) >= 1);
  std::vector<std::vector<std::vector<float>>> resid(groups.size());  // [group][rank][element]
  double fed = 0.0, applied = 0.0;  // over every node-summed element, all iterations
  for (int it = 0; it < 4; ++it) {
    fill(rt, it);
    backward(rt);
    const omgs::IterationStats st = rt.finish();
    REQUIRE(st.status == omgs::Status::ok);
    if (P > 1) CHECK(st.bytes_received > 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const omgs::Group& gr = groups[g];
      if (gr.collective != omgs::Collective::sparse_node) continue;
      std::vector<std::vector<float>> grad;
      for (int r = 0; r < P; ++r) grad.push_back(group_grad(rt, gr, r, it));
      if (resid[g].empty())
        resid[g].assign(std::size_t(P), std::vector<float>(grad[0].size(), 0.0f));
      const std::vector<float> sum =
          simulate(resid[g], grad, omgs::selected_count(gr.numel, 0.05), G);
      const std::vector<float> agg = group_view(rt, gr, false), res = group_view(rt, gr, true);
      long bad = 0;
      for (std::size_t i = 0; i < sum.size(); ++i) {
        bad += agg[i] != sum[i] * (1.0f / float(P));
        bad += res[i] != resid[g][std::size_t(me)][i];
        for (int r = 0; r < P; ++r) fed += grad[std::size_t(r)][i];
        applied += double(agg[i]) * P;
      }
      CHECK(bad == 0);
    }
  }
  // Conservation: what was fed in = P x the applied aggregates + what the residuals hold.
  double held = 0.0;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (groups[g].collective == omgs::Collective::sparse_node)
      for (float v : group_view(rt, groups[g], true)) held += v;
  MPI_Allreduce(MPI_IN_PLACE, &held, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(std::fabs(fed - applied - held) <= 1e-3 * (1.0 + std::fabs(fed)));
}

TEST_CASE("sparse node-summed groups: a NaN fails the group everywhere, mass kept",
          "[runtime][sparse_node]") {
  const int P = world_size();
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(write_model(), P >= 2 ? 2 : 1, true));
  std::size_t layer = rt.layers().size();
  for (const omgs::Group& g : rt.plan().groups)
    if (g.collective == omgs::Collective::sparse_node) layer = g.begin;
  REQUIRE(layer < rt.layers().size());
  fill(rt, 0);
  const bool poisoned = world_rank() == P - 1;
  if (poisoned) {
    std::vector<float> g = to_host(rt.gradient(layer));
    g[0] = std::nanf("");
    omgs_test::copy_to(rt.gradient(layer), g);
  }
  backward(rt);
  const omgs::IterationStats st = rt.finish();
  CHECK(st.status == omgs::Status::nonfinite_gradient);
  CHECK(rt.plan().groups[std::size_t(st.failed_group)].collective == omgs::Collective::sparse_node);
  const auto agg = to_host(rt.aggregated(layer));
  const auto res = to_host(rt.residual(layer));
  long bad = 0;
  for (std::size_t i = 0; i < agg.size(); ++i) {
    bad += agg[i] != 0.0f;
    bad += res[i] != (poisoned ? 0.0f : grad_value(world_rank(), 0, layer, i));
  }
  CHECK(bad == 0);
  fill(rt, 1);
  backward(rt);
  CHECK(rt.finish().status == omgs::Status::ok);
}
