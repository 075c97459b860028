// omgs::Runtime: the public class, and the iteration: ready() has a group's exchange
// prepare its data and submits it once its layers are in, finish() waits for each group and
// has its exchange apply it. Set-up, buffers, the plan instance, the exchanges, calibration,
// profiling and trace are in the files beside this one.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/backoff.hpp"
#include "runtime/exchange_kernels.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs {

const char* to_string(Status status) noexcept {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::unknown_layer:
      return "unknown layer";
    case Status::already_ready:
      return "layer already ready";
    case Status::not_all_ready:
      return "not every layer is ready";
    case Status::shape_mismatch:
      return "gradient view of the wrong length or type";
    case Status::nonfinite_gradient:
      return "non-finite gradient";
    case Status::comm_failed:
      return "communication failed";
    case Status::plan_failed:
      return "planning from the measured backward times failed";
    case Status::concurrent_call:
      return "called from two threads at once (ready/finish must be serialized)";
  }
  return "unknown status";
}

namespace detail {

Status RuntimeImpl::ready(std::size_t l) noexcept {
  const double t_in = now_s();
  if (l >= layers.size())
    return fail(Status::unknown_layer, "omgs: ready(" + std::to_string(l) + "): there are only " +
                                           std::to_string(layers.size()) + " layers");
  if (is_ready[l])
    return fail(Status::already_ready, "omgs: ready(" + std::to_string(l) + "): layer '" +
                                           layers[l].name + "' is already ready in this iteration");
  if (ready_count == 0) {
    current = IterationStats{};
    iteration_start_s = loop_.iteration_start(t_in);
  }
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::ready"));
  is_ready[l] = 1;
  ++ready_count;
  loop_.layer_ready(l, t_in);
  const std::size_t g = plan().group_of_layer[l];
  if (--instance_->remaining[g] == 0) sparsify(g);
  loop_.returned(now_s());
  Kokkos::Profiling::popRegion();
  return Status::ok;
}

/// Group g's layers are all in: its exchange prepares what it sends, then the engine gets it.
void RuntimeImpl::sparsify(std::size_t g) {
  GroupExchange& ex = *instance_->exchanges[g];
  Kokkos::Profiling::pushRegion(ex.region());
  const double cpu0 = begin_sparsify(g);
  widen_gradient(g);    // bf16 / fp16 gradients (when the type is one)
  prepare_gradient(g);  // clipping, momentum correction (when on)
  ex.prepare(current);
  commit_momentum(g);
  end_sparsify(g, cpu0);
  Kokkos::Profiling::popRegion();
  submit(g);
}

/// Hands group g to the engine. Back-pressure: the queue holds every group, so this only
/// spins if the progress thread has not yet drained the previous iteration's items.
void RuntimeImpl::submit(std::size_t g) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::submit"));
  const double deadline = now_s() + options.wait_timeout_s;
  detail::Backoff backoff(IdleOptions{});
  ProgressEngine& engine = *instance_->engine;
  for (;;) {
    const SubmitStatus s = engine.submit(static_cast<int>(g));
    if (s != SubmitStatus::queue_full) break;
    engine.progress();
    if (now_s() > deadline) break;
    backoff.pause();
  }
  const GroupExchange& ex = *instance_->exchanges[g];
  current.bytes_sent += ex.bytes_sent();
  // An allgather's pairs; a sparse allreduce counts what it sent at completion.
  if (ex.k() > 0 && ex.bytes_sent() > 0) count_pairs(current, ex.k(), ex.bytes_sent());
  Kokkos::Profiling::popRegion();
}

/// finish() before every layer was ready: nothing changes; the first missing layer is named.
IterationStats RuntimeImpl::not_all_ready() {
  std::size_t missing = layers.size();
  for (std::size_t l = layers.size(); l-- > 0;)
    if (!is_ready[l]) {
      missing = l;
      break;
    }
  IterationStats r = current;
  r.status = fail(Status::not_all_ready,
                  "omgs: finish(): layer " + std::to_string(missing) + " '" + layers[missing].name +
                      "' (and " + std::to_string(layers.size() - ready_count - 1) +
                      " more) not ready; call ready() for them, then finish()");
  return r;
}

WaitStatus RuntimeImpl::wait_for_group(std::size_t g) {
  const double t0 = now_s();
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::finish::wait"));
  const WaitStatus w = instance_->engine->wait(static_cast<int>(g), options.wait_timeout_s);
  Kokkos::Profiling::popRegion();
  current.finish_wait_s += now_s() - t0;
  return w;
}

/// The watchdog: ask every rank how far it got, name the ones holding the group up; then
/// abort the job or report (the iteration stays open, finish() may be called again).
IterationStats RuntimeImpl::timed_out(std::size_t g) {
  diagnosis = instance_->engine->diagnose(static_cast<int>(g), options.watchdog_query_s);
  last_error = "omgs: finish(): " + instance_->exchanges[g]->slice().label +
               " did not complete within " + std::to_string(options.wait_timeout_s) + " s. " +
               diagnosis.report;
  if (options.on_timeout == TimeoutAction::abort) {
    std::fprintf(stderr, "%s\nomgs: aborting the job (on_timeout = abort)\n", last_error.c_str());
    std::fflush(stderr);
    abort_job(comm, 3);
  }
  last_error += " The iteration is still open: call finish() again to keep waiting.";
  IterationStats r = current;
  r.status = Status::comm_failed;
  r.failed_group = static_cast<int>(g);
  return r;
}

/// Group g's exchange is over: its exchange applies it, or skips it on this rank (MPI failed
/// it) or on every rank (some rank could not contribute), keeping this rank's contribution
/// in its residual.
void RuntimeImpl::complete_group(std::size_t g, WaitStatus w) {
  PlanInstance& p = *instance_;
  p.group_done[g] = 1;
  p.exchanges[g]->complete(
      w, GroupReport{current, last_error, p.agg_start_s[g], p.agg_end_s[g], *p.engine});
  narrow_aggregate(g);  // bf16 / fp16 gradients (when the type is one)
}

/// Every group is dealt with: the measured timeline, the stats, and the state of the next
/// iteration.
void RuntimeImpl::close_iteration(double finish_start) {
  IterationStats& st = current;
  const double finish_end = now_s();
  record(TraceKind::wait, -1, finish_start, finish_end);
  loop_.close_iteration();
  // The next iteration's aggregations: a group that skips its aggregation leaves NaN.
  std::fill(instance_->agg_start_s.begin(), instance_->agg_start_s.end(), nan_s);
  std::fill(instance_->agg_end_s.begin(), instance_->agg_end_s.end(), nan_s);
  st.iteration_s = finish_end - iteration_start_s;
  st.iteration = iterations++;
  st.profiling = loop_.profiling();
  std::fill(is_ready.begin(), is_ready.end(), 0);
  std::fill(instance_->group_done.begin(), instance_->group_done.end(), 0);
  instance_->reset_remaining();
  ready_count = 0;
}

IterationStats RuntimeImpl::finish() noexcept {
  if (ready_count < layers.size()) return not_all_ready();
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::finish"));
  const double finish_start = now_s();
  for (std::size_t g = 0; g < plan().groups.size(); ++g) {
    if (instance_->group_done[g]) continue;  // a retried finish() after a timeout
    const WaitStatus w = wait_for_group(g);
    if (w == WaitStatus::timeout) {
      Kokkos::Profiling::popRegion();
      return timed_out(g);
    }
    complete_group(g, w);
  }
  detail::fence(instance_->ctx.exec());
  Kokkos::Profiling::popRegion();
  close_iteration(finish_start);
  loop_.after_iteration(current);
  advance_schedule(current);
  stats = current;
  return current;
}

}  // namespace detail

Runtime::Runtime(MPI_Comm comm, std::vector<LayerSpec> layers, RuntimeOptions options)
    : impl_(std::make_unique<detail::RuntimeImpl>(comm, std::move(layers), std::move(options))) {}

Runtime::~Runtime() = default;

std::size_t Runtime::num_layers() const noexcept {
  return impl_->layers.size();
}

GradientView Runtime::gradient(std::size_t l) const {
  const auto& s = *impl_;
  if (s.options.gradient_type != GradientType::fp32)
    throw Error(std::string("omgs::Runtime::gradient: the gradient type is ") +
                std::string(to_string(s.options.gradient_type)) + ": use gradient_" +
                std::string(to_string(s.options.gradient_type)) + "(l)");
  return s.layer_slice(s.flat_.grad, l, "gradient");
}

ConstGradientView Runtime::aggregated(std::size_t l) const {
  return impl_->layer_slice(impl_->flat_.agg, l, "aggregated");
}

ConstGradientView Runtime::momentum(std::size_t l) const {
  if (impl_->flat_.velocity.extent(0) == 0)
    throw Error("omgs::Runtime::momentum: momentum correction is off (RuntimeOptions::momentum 0)");
  return impl_->layer_slice(impl_->flat_.velocity, l, "momentum");
}

ConstGradientView Runtime::residual(std::size_t l) const {
  const detail::RuntimeImpl& r = *impl_;
  if (l >= r.layers.size()) return r.layer_slice(r.flat_.resid, l, "residual");  // throws
  return r.layer_slice(r.instance_->ctx.resid_of(r.plan().group_of_layer[l]), l, "residual");
}

void Runtime::begin_backward() noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) return;
  impl_->loop_.begin_backward(detail::now_s());
}

Status Runtime::ready(std::size_t l) noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) return Status::concurrent_call;
  if (!impl_->running()) return impl_->stopped_at_finalize();
  return impl_->ready(l);
}

IterationStats Runtime::finish() noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) {
    IterationStats r;
    r.status = Status::concurrent_call;
    return r;
  }
  if (!impl_->running()) {
    IterationStats r;
    r.status = impl_->stopped_at_finalize();
    return r;
  }
  return impl_->finish();
}

bool Runtime::profiling() const noexcept {
  return impl_->loop_.profiling();
}

const Timeline& Runtime::measured() const noexcept {
  return impl_->loop_.measured();
}

const Diagnosis& Runtime::last_diagnosis() const noexcept {
  return impl_->diagnosis;
}

const Plan& Runtime::plan() const noexcept {
  return impl_->plan();
}
const std::vector<LayerSpec>& Runtime::layers() const noexcept {
  return impl_->layers;
}
const PerfModel& Runtime::perf_model() const noexcept {
  return *impl_->model;
}
const CalibrationReport& Runtime::calibration() const noexcept {
  return impl_->calibration;
}
const RefitReport& Runtime::last_refit() const noexcept {
  return impl_->loop_.last_refit();
}
const IterationStats& Runtime::last_stats() const noexcept {
  return impl_->stats;
}
RuntimeStats Runtime::stats() const {
  RuntimeStats s{impl_->stats, impl_->loop_.measured(), progress_stats(), {}};
  if (impl_->instance_) {
    s.footprint.group_bytes = impl_->group_bytes(impl_->plan());
    for (const std::uint64_t b : s.footprint.group_bytes) s.footprint.plan_bytes += b;
  }
  return s;
}
ProgressStats Runtime::progress_stats() const {
  return impl_->running() ? impl_->instance_->engine->stats() : ProgressStats{};
}
std::size_t Runtime::group_k(std::size_t g) const {
  return impl_->instance_->exchanges.at(g)->k();
}
const std::string& Runtime::last_error() const noexcept {
  return impl_->last_error;
}
int Runtime::rank() const noexcept {
  return impl_->rank;
}
int Runtime::size() const noexcept {
  return impl_->size;
}

}  // namespace omgs
