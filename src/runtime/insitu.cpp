// The closed loop's in-situ measurements: every finished iteration's measured timeline
// (per group: backward span, sparsify, allgather from post to completion), finish()'s
// wait and the layers' backward times, kept in slots allocated at construction; when a
// window is full, the refit (refit.cpp). Nothing here allocates or fences.
#include <algorithm>

#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// At construction: the window's slots, each with room for one group per layer (no plan
/// has more), so that recording never allocates, whichever plan is in force.
void RuntimeImpl::start_loop() {
  settled = options.refit_iterations <= 0;
  if (settled) return;
  window.resize(static_cast<std::size_t>(options.refit_iterations));
  for (Timeline& t : window) t.groups.reserve(layers.size());
  window_wait.assign(window.size(), 0.0);
  window_bwd.assign(window.size() * layers.size(), nan_s);
  window_iter.assign(window.size(), 0.0);
}

/// After finish() (every rank counts the same iterations): the stats of the closed loop,
/// this iteration's measurements, and at the end of a window the refit (collective).
void RuntimeImpl::record_insitu(IterationStats& st) noexcept {
  const Timeline& measured = instance_->measured;
  st.predicted_s = plan().predicted.iteration_end_s;
  st.measured_s = measured.iteration_end_s;
  st.model_generation = model_generation;
  st.plan_generation = plan_generation;
  if (settled || profiling) return;
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
    double* bwd = window_bwd.data() + filled * layers.size();
    std::copy(layer_bwd_s.begin(), layer_bwd_s.end(), bwd);
    if (estimated_layer < layers.size()) bwd[estimated_layer] = nan_s;  // not measured
    ++filled;
  }
  if (++since_refit < window.size()) return;
  const std::uint32_t plan_before = plan_generation;
  refit();
  st.refitted = true;
  st.replanned = plan_generation != plan_before;
  st.model_generation = model_generation;
  st.plan_generation = plan_generation;
  st.predicted_s = plan().predicted.iteration_end_s;
  reset_window();
}

void RuntimeImpl::reset_window() noexcept {
  filled = 0;
  since_refit = 0;
}

}  // namespace omgs::detail
