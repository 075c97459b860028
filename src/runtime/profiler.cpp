// The profiler: backward times measured from the spacing of ready() calls, the measured
// timeline of each iteration (and its trace events), and the one replan after profiling
// (which installs its plan like every other: plan_instance.cpp).
#include <algorithm>
#include <cmath>

#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/collectives.hpp"
#include "runtime/closed_loop.hpp"

namespace omgs::detail {

void fill_by_rate(const std::vector<LayerSpec>& layers, std::vector<double>& t) {
  double known_s = 0, known_numel = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (std::isnan(t[l])) continue;
    known_s += t[l];
    known_numel += static_cast<double>(layers[l].numel);
  }
  for (std::size_t l = 0; l < layers.size(); ++l)
    if (std::isnan(t[l]))
      t[l] = known_numel > 0 ? known_s / known_numel * static_cast<double>(layers[l].numel) : 0.0;
}

/// The measured pipeline of the iteration just finished, in the form of Plan::predicted,
/// and its trace events. A layer whose compute time is unknown (the first ready() without
/// begin_backward()) gets the time per element of the others.
void ClosedLoop::finish_timeline() noexcept {
  const std::vector<LayerSpec>& layers = host_.layers();
  estimated_layer = layers.size();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (std::isnan(layer_bwd_s[l])) {
      // Its mean so far if it was ever measured, else (below) the others' time per element.
      estimated_layer = l;
      if (bwd_count[l] > 0) layer_bwd_s[l] = bwd_sum[l] / bwd_count[l];
    } else {
      layer_bwd_s[l] = std::max(0.0, layer_bwd_s[l]);
    }
  }
  fill_by_rate(layers, layer_bwd_s);
  double origin = std::numeric_limits<double>::infinity();
  for (std::size_t l = 0; l < layers.size(); ++l)
    origin = std::min(origin, layer_ready_s[l] - layer_bwd_s[l]);
  const Plan& plan = host_.plan();
  Timeline& measured = measured_;
  measured.compute_end_s = 0;
  measured.iteration_end_s = 0;
  measured.comm_total_s = 0;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& gr = plan.groups[g];
    double bstart = std::numeric_limits<double>::infinity();
    for (std::size_t l = gr.begin; l < gr.end; ++l)
      bstart = std::min(bstart, layer_ready_s[l] - layer_bwd_s[l]);
    const GroupIteration it = host_.group_iteration(g);
    const GroupTimes& ct = it.comm;
    GroupTiming& t = measured.groups[g];
    t.backward_start_s = bstart - origin;
    t.topk_start_s = it.topk_start_s - origin;
    t.topk_end_s = it.topk_end_s - origin;
    t.comm_start_s = ct.post_s - origin;
    t.comm_end_s = ct.complete_s - origin;
    measured.compute_end_s = std::max(measured.compute_end_s, t.topk_end_s);
    measured.iteration_end_s = std::max(measured.iteration_end_s, t.comm_end_s);
    measured.comm_total_s += t.comm_end_s - t.comm_start_s;
    host_.record(TraceKind::backward, static_cast<int>(g), bstart, it.topk_start_s);
    host_.record(TraceKind::sparsify, static_cast<int>(g), it.topk_start_s, it.topk_end_s);
    host_.record(TraceKind::queue, static_cast<int>(g), ct.submit_s, ct.post_s);
    host_.record(TraceKind::exchange, static_cast<int>(g), ct.post_s, ct.complete_s, it.collective);
    if (!std::isnan(it.agg_start_s))
      host_.record(TraceKind::aggregate, static_cast<int>(g), it.agg_start_s, it.agg_end_s);
  }
  measured.non_overlapped_comm_s = std::max(0.0, measured.iteration_end_s - measured.compute_end_s);
}

/// The layers with the backward times accumulated in bwd_sum / bwd_count, averaged over
/// ranks on rank 0 and broadcast (bit-identical everywhere). Collective.
std::vector<LayerSpec> ClosedLoop::agreed_backward_times() const {
  const std::vector<LayerSpec>& layers = host_.layers();
  const std::size_t L = layers.size();
  std::vector<double> mean(L);
  for (std::size_t l = 0; l < L; ++l)
    mean[l] = bwd_count[l] > 0 ? bwd_sum[l] / bwd_count[l] : nan_s;
  // A layer never measured (always the first ready() without begin_backward) gets the
  // time per element of the others.
  fill_by_rate(layers, mean);
  const std::vector<double> agreed = mean_from_root(host_.comm(), mean);
  std::vector<LayerSpec> out = layers;
  for (std::size_t l = 0; l < L; ++l) out[l].backward_s = agreed[l];
  return out;
}

/// After profiling: average the measured backward times over iterations and ranks (rank
/// 0's reduction, broadcast, so every rank plans with bit-identical inputs), plan with the
/// chosen planner, check the plan everywhere, and rebuild what depends on the groups.
/// Collective; every rank calls it at the same iteration. On failure `profiling_` stays
/// true and the layer-wise plan is kept.
void ClosedLoop::replan() noexcept {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::replan"));
  try {
    std::vector<LayerSpec> measured_layers = agreed_backward_times();
    std::string err;
    Plan next;
    try {
      next = host_.plan_for(planner, measured_layers, host_.model(), OptimalBudget{});
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree_on_error(host_.comm(), err, "omgs");
    host_.install_plan(std::move(next));
    host_.set_planning_inputs(std::move(measured_layers), nullptr);
    profiling_ = false;
  } catch (const std::exception& e) {
    host_.set_error(std::string("omgs: planning with the measured backward times failed (") +
                    e.what() + "); communication stays layer-wise");
  }
  Kokkos::Profiling::popRegion();
}

void ClosedLoop::plan_installed(std::size_t groups) {
  measured_.compute_end_s = measured_.iteration_end_s = 0;
  measured_.non_overlapped_comm_s = measured_.comm_total_s = 0;
  measured_.groups.assign(groups, GroupTiming{});
}

/// Adds this iteration's measured backward times to bwd_sum / bwd_count.
void ClosedLoop::accumulate_backward() noexcept {
  for (std::size_t l = 0; l < layer_bwd_s.size(); ++l) {
    if (l == estimated_layer) continue;  // not measured in this iteration
    bwd_sum[l] += layer_bwd_s[l];
    ++bwd_count[l];
  }
}

/// After finish(): add this iteration's backward times; at the last profiled iteration
/// (the same on every rank) replan. A failed replan keeps the layer-wise plan for good.
void ClosedLoop::accumulate_profile(IterationStats& st) noexcept {
  if (!profiling_) return;
  accumulate_backward();
  if (++profiled != profile_iterations) return;
  replan();
  st.replanned = !profiling_;
  if (profiling_) {
    st.status = Status::plan_failed;
    profiling_ = false;  // keep the layer-wise plan; do not try again
  }
}

}  // namespace omgs::detail
