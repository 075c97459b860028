// The closed loop's place in the iteration (closed_loop.hpp) and its in-situ measurements:
// every finished iteration's measured timeline (per group: backward span, sparsify,
// allgather from post to completion), finish()'s wait and the layers' backward times, kept
// in slots allocated at start(); when a window is full, the refit (refit.cpp). Nothing
// here allocates or fences.
#include <algorithm>

#include "runtime/closed_loop.hpp"

namespace omgs::detail {

/// At construction: the profiler's per-layer slots, and the window's slots, each with room
/// for one group per layer (no plan has more), so that recording never allocates,
/// whichever plan is in force.
void ClosedLoop::start(const RuntimeOptions& options, std::size_t layers, bool measuring) {
  planner = options.planner;
  profile_iterations = options.profile_iterations;
  refit_iterations = options.refit_iterations;
  max_replans = options.max_replans;
  replan_min_gain = options.replan_min_gain;
  profiling_ = measuring;
  layer_ready_s.assign(layers, nan_s);
  layer_bwd_s.assign(layers, nan_s);
  bwd_sum.assign(layers, 0.0);
  bwd_count.assign(layers, 0);
  settled = refit_iterations <= 0;
  if (settled) return;
  window.resize(static_cast<std::size_t>(refit_iterations));
  for (Timeline& t : window) t.groups.reserve(layers);
  window_wait.assign(window.size(), 0.0);
  window_bwd.assign(window.size() * layers, nan_s);
  window_iter.assign(window.size(), 0.0);
}

void ClosedLoop::close_iteration() noexcept {
  finish_timeline();
  begin_s = nan_s;
  last_return_s = nan_s;
}

void ClosedLoop::after_iteration(IterationStats& st) noexcept {
  accumulate_profile(st);
  record_insitu(st);
}

void ClosedLoop::density_changed() noexcept {
  reset_window();
  last_refit_.switched = false;
}

/// After finish() (every rank counts the same iterations): the stats of the closed loop,
/// this iteration's measurements, and at the end of a window the refit (collective).
void ClosedLoop::record_insitu(IterationStats& st) noexcept {
  const Timeline& measured = measured_;
  st.predicted_s = host_.plan().predicted.iteration_end_s;
  st.measured_s = measured.iteration_end_s;
  st.model_generation = model_generation;
  st.plan_generation = host_.plan_generation();
  if (settled || profiling_) return;
  if (!window_open || st.replanned) {  // the window starts after profiling's replan
    window_open = true;
    reset_window();
    if (st.replanned) return;
  }
  if (st.status == Status::ok) {
    Timeline& slot = window[filled];
    slot.groups.assign(measured.groups.begin(), measured.groups.end());  // within capacity
    slot.compute_end_s = measured.compute_end_s;
    slot.iteration_end_s = measured.iteration_end_s;
    slot.non_overlapped_comm_s = measured.non_overlapped_comm_s;
    slot.comm_total_s = measured.comm_total_s;
    window_wait[filled] = st.finish_wait_s;
    window_iter[filled] = st.iteration_s;
    const std::size_t L = layer_bwd_s.size();
    double* bwd = window_bwd.data() + filled * L;
    std::copy(layer_bwd_s.begin(), layer_bwd_s.end(), bwd);
    if (estimated_layer < L) bwd[estimated_layer] = nan_s;  // not measured
    ++filled;
  }
  if (++since_refit < window.size()) return;
  const std::uint32_t plan_before = host_.plan_generation();
  refit(st.iteration);
  st.refitted = true;
  st.replanned = host_.plan_generation() != plan_before;
  st.model_generation = model_generation;
  st.plan_generation = host_.plan_generation();
  st.predicted_s = host_.plan().predicted.iteration_end_s;
  reset_window();
}

void ClosedLoop::reset_window() noexcept {
  filled = 0;
  since_refit = 0;
}

}  // namespace omgs::detail
