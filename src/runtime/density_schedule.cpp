// The density in force: the warm-up schedule (RuntimeOptions::warmup_*) and set_density().
// A change reruns the planner for the new density and swaps the plan instance in through
// install_plan(), the path of every plan change: the exchanges' buffers and k follow the
// density, while the residuals and velocities (flat buffers) carry over, so no gradient
// mass is lost; the closed loop starts a new window, its measurements being of the old plan.
#include <cmath>
#include <string>

#include "comm/arrival.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

namespace {

/// DGC's exponential warm-up: stage i of S (iterations [i W / S, (i + 1) W / S)) uses
/// d0 * (d / d0)^(i / S); from iteration W on, d. Pure, so every rank computes the same.
double scheduled_density(const RuntimeOptions& o, std::uint64_t iteration) {
  if (o.warmup_iterations == 0 || iteration >= o.warmup_iterations) return o.density;
  const double stages = static_cast<double>(o.warmup_stages);
  const double stage = std::floor(static_cast<double>(iteration) * stages /
                                  static_cast<double>(o.warmup_iterations));
  return o.warmup_density * std::pow(o.density / o.warmup_density, stage / stages);
}

void check_fraction(double v, double lo, bool lo_open, double hi, const char* what) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v < hi;
  if (!ok)
    throw Error(std::string("omgs: ") + what + " is " + std::to_string(v) + ", outside " +
                (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) + ")");
}

}  // namespace

/// Local checks of the options of accuracy at low density (check_local_input()).
void RuntimeImpl::check_schedule_options() const {
  check_fraction(options.momentum, 0.0, false, 1.0, "momentum");
  if (!(options.clip_norm >= 0) || !std::isfinite(options.clip_norm))
    throw Error("omgs: clip_norm must be a finite number >= 0 (0: off), not " +
                std::to_string(options.clip_norm));
  if (options.warmup_iterations == 0) return;
  if (options.warmup_stages < 1)
    throw Error("omgs: warmup_stages must be >= 1 (it is " + std::to_string(options.warmup_stages) +
                ")");
  validate_density(options.warmup_density);
  if (options.warmup_density < options.density)
    throw Error("omgs: warmup_density (" + std::to_string(options.warmup_density) +
                ") must be at least density (" + std::to_string(options.density) +
                "): the warm-up starts denser");
}

/// Construction: the density of the first iteration.
void RuntimeImpl::start_schedule() {
  warming = options.warmup_iterations > 0;
  density_now = scheduled_density(options, 0);
}

/// After finish(), at the same iteration on every rank: the schedule's density for the next
/// iteration; a new stage replans (collective). A failure (agreed by every rank) keeps the
/// plan in force and ends the warm-up.
void RuntimeImpl::advance_schedule(IterationStats& st) noexcept {
  if (!warming) return;
  const double next = scheduled_density(options, iterations);
  warming = iterations < options.warmup_iterations;
  if (next == density_now) return;
  try {
    apply_density(next);
    st.replanned = true;
    st.plan_generation = instance_->generation;
    st.predicted_s = plan().predicted.iteration_end_s;
  } catch (const std::exception& e) {
    warming = false;
    if (st.status == Status::ok) {
      st.status = Status::plan_failed;
      last_error = std::string("omgs: the warm-up's change to density ") + std::to_string(next) +
                   " failed (" + e.what() + "); the density stays " + std::to_string(density_now);
    }
  }
}

/// Collective: the checks of set_density(), agreed by every rank, then the change.
void RuntimeImpl::set_density(double d) {
  const std::string who = "omgs::Runtime::set_density";
  check_arrival(comm, options.wait_timeout_s, who);
  std::string err;
  try {
    if (ready_count != 0)
      throw Error(who + ": called within an iteration (" + std::to_string(ready_count) +
                  " layers ready); call it after finish()");
    validate_density(d);
  } catch (const Error& e) {
    err = e.what();
  }
  agree_on_error(comm, err, who);
  std::vector<std::uint64_t> mx, mn;
  max_min(comm, {double_bits(d)}, mx, mn);
  if (mx[0] != mn[0])
    throw Error(who + ": ranks disagree on the density (this rank " + std::to_string(rank) +
                " passed " + std::to_string(d) + ")");
  warming = false;
  if (d != density_now) apply_density(d);
}

/// Collective: plan for density d and install it; on an error (agreed by every rank) the
/// plan and density in force stay and the error is rethrown.
void RuntimeImpl::apply_density(double d) {
  const double before = density_now;
  density_now = d;
  try {
    std::string err;
    Plan next;
    try {
      next = make_plan(loop_.profiling() ? Planner::layerwise : options.planner, layers, *model,
                       plan_config());
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree_on_error(comm, err, "omgs");
    install_plan(std::move(next));
  } catch (...) {
    density_now = before;
    throw;
  }
  // The closed loop: a new window for the new plan; a previous switch is not judged against
  // a window of another density.
  loop_.density_changed();
}

}  // namespace omgs::detail

namespace omgs {

void Runtime::set_density(double density) {
  if (!impl_->running())
    throw Error("omgs::Runtime::set_density: MPI_Finalize was called: the runtime was stopped");
  impl_->set_density(density);
}

double Runtime::density() const noexcept {
  return impl_->density_now;
}

}  // namespace omgs
