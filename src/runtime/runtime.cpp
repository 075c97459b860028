// omgs::Runtime: the public class, and the iteration: ready() sparsifies and submits a
// group once its layers are in, finish() waits for each group and applies it. Set-up,
// buffers, calibration, profiling and trace are in the files beside this one.
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
      return "gradient view of the wrong length";
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

namespace {

/// Marks a per-iteration call as running; a second thread entering meanwhile is refused
/// (Status::concurrent_call) instead of corrupting the iteration's state.
struct CallGuard {
  std::atomic<int>& flag;
  bool ok;
  explicit CallGuard(std::atomic<int>& f) noexcept
      : flag(f), ok(f.exchange(1, std::memory_order_acquire) == 0) {}
  ~CallGuard() {
    if (ok) flag.store(0, std::memory_order_release);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
};

}  // namespace

Status RuntimeImpl::ready(std::size_t l) noexcept {
  auto& s = *this;
  const double t_in = now_s();
  if (l >= s.layers.size())
    return s.fail(Status::unknown_layer, "omgs: ready(" + std::to_string(l) + "): there are only " +
                                             std::to_string(s.layers.size()) + " layers");
  if (s.is_ready[l])
    return s.fail(Status::already_ready, "omgs: ready(" + std::to_string(l) + "): layer '" +
                                             s.layers[l].name +
                                             "' is already ready in this iteration");
  if (s.ready_count == 0) {
    s.current = IterationStats{};
    s.iteration_start_s = std::isnan(s.begin_s) ? t_in : s.begin_s;
  }
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::ready"));
  s.is_ready[l] = 1;
  ++s.ready_count;
  // The training code computed this layer between the previous ready() and this one.
  s.layer_ready_s[l] = t_in;
  s.layer_bwd_s[l] = t_in - s.last_return_s;  // NaN for the first, without begin_backward
  const std::size_t g = s.plan.group_of_layer[l];
  if (--s.remaining[g] == 0) s.sparsify(g);
  s.last_return_s = now_s();
  Kokkos::Profiling::popRegion();
  return Status::ok;
}

void RuntimeImpl::sparsify(std::size_t g) {
  if (is_dense(g)) return send_dense(g);
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::sparsify"));
  const double cpu0 = begin_sparsify(g);
  const auto range = group_range(g);
  // The one-read form: the new residual goes to the group's other buffer, which becomes
  // current on success; on failure the current one is untouched and stays current.
  const TopkResult r = selector->select_with_feedback(
      Kokkos::subview(grad, range), Kokkos::subview(resid_of(g), range),
      Kokkos::subview(resid_next(g), range), group_k[g], sel_index, sel_value);
  const bool failed = !r.ok();
  if (!failed) resid_swapped[g] ^= 1;
  if (failed) {
    failed_here[g] = 1;
    current.nonfinite += r.nonfinite;
  }
  kernels::pack_pairs(exec(), send, send_offset[g], sel_index, sel_value, group_k[g], failed);
  detail::fence(exec());  // the pairs are complete before MPI sees them
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
  for (;;) {
    const SubmitStatus s = engine->submit(static_cast<int>(g));
    if (s != SubmitStatus::queue_full) break;
    engine->progress();
    if (now_s() > deadline) break;
    backoff.pause();
  }
  current.bytes_sent += group_k[g] * sizeof(SparsePair);
  Kokkos::Profiling::popRegion();
}

void RuntimeImpl::aggregate(std::size_t g) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::aggregate"));
  const double t0 = now_s();
  agg_start_s[g] = t0;
  kernels::scatter_add(exec(), recv, recv_offset[g], group_k[g] * static_cast<std::size_t>(size),
                       agg, group_offset[g], group_numel[g], 1.0f / static_cast<float>(size));
  current.bytes_received += group_k[g] * static_cast<std::size_t>(size) * sizeof(SparsePair);
  agg_end_s[g] = now_s();  // launched (complete on host back-ends; finish() fences once)
  current.aggregate_s += agg_end_s[g] - t0;
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
  const WaitStatus w = engine->wait(static_cast<int>(g), options.wait_timeout_s);
  Kokkos::Profiling::popRegion();
  current.finish_wait_s += now_s() - t0;
  return w;
}

/// The watchdog: ask every rank how far it got, name the ones holding the group up; then
/// abort the job or report (the iteration stays open, finish() may be called again).
IterationStats RuntimeImpl::timed_out(std::size_t g) {
  diagnosis = engine->diagnose(static_cast<int>(g), options.watchdog_query_s);
  last_error = "omgs: finish(): " + group_label(g) + " did not complete within " +
               std::to_string(options.wait_timeout_s) + " s. " + diagnosis.report;
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

std::string RuntimeImpl::collective_failure(WaitStatus w) {
  return w == WaitStatus::failed ? "completed with an MPI error; this rank's communicator is no "
                                   "longer usable and every later group fails"
                                 : "was never submitted";
}

/// Group g's exchange is over: apply it, or skip it on this rank (MPI failed it) or on
/// every rank (some rank sent the failure marker), keeping the selection in the residual.
void RuntimeImpl::complete_group(std::size_t g, WaitStatus w) {
  IterationStats& st = current;
  group_done[g] = 1;
  if (is_dense(g)) return complete_dense(g, w);
  if (w != WaitStatus::ok) {
    // MPI failed the collective (or it was never submitted): its pairs are not valid.
    skip_group(g);
    if (st.status != Status::ok) return;
    st.status = Status::comm_failed;
    st.failed_group = static_cast<int>(g);
    last_error = "omgs: finish(): the allgather of " + group_label(g) + " " +
                 collective_failure(w) + "; this rank's selection was kept in its residual";
    return;
  }
  const int bad = kernels::count_failed_blocks(exec(), recv, recv_offset[g], group_k[g], size,
                                               bad_blocks, bad_blocks_host);
  if (bad == 0) {
    aggregate(g);
    return;
  }
  // Some rank could not contribute: no rank applies this group; healthy ranks keep their
  // selection in the residual, so no gradient mass is lost.
  skip_group(g);
  if (st.status != Status::ok) return;
  st.status = Status::nonfinite_gradient;
  st.failed_group = static_cast<int>(g);
  last_error = "omgs: " + group_label(g) + " held non-finite values on " + std::to_string(bad) +
               " rank(s) (" + std::to_string(st.nonfinite) +
               " non-finite values in this rank's groups of this iteration); the step is "
               "skipped for it on every rank";
}

/// Every group is dealt with: the measured timeline, the stats, and the state of the next
/// iteration.
void RuntimeImpl::close_iteration(double finish_start) {
  IterationStats& st = current;
  const double finish_end = now_s();
  record(TraceKind::wait, -1, finish_start, finish_end);
  finish_timeline();
  st.iteration_s = finish_end - iteration_start_s;
  st.iteration = iterations++;
  st.profiling = profiling;
  std::fill(is_ready.begin(), is_ready.end(), 0);
  std::fill(failed_here.begin(), failed_here.end(), 0);
  std::fill(group_done.begin(), group_done.end(), 0);
  reset_remaining();
  ready_count = 0;
  begin_s = nan_s;
  last_return_s = nan_s;
}

IterationStats RuntimeImpl::finish() noexcept {
  if (ready_count < layers.size()) return not_all_ready();
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::finish"));
  const double finish_start = now_s();
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    if (group_done[g]) continue;  // a retried finish() after a timeout
    const WaitStatus w = wait_for_group(g);
    if (w == WaitStatus::timeout) {
      Kokkos::Profiling::popRegion();
      return timed_out(g);
    }
    complete_group(g, w);
  }
  detail::fence(exec());
  Kokkos::Profiling::popRegion();
  close_iteration(finish_start);
  accumulate_profile(current);
  record_insitu(current);
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
  return impl_->layer_slice(impl_->grad, l, "gradient");
}

ConstGradientView Runtime::aggregated(std::size_t l) const {
  return impl_->layer_slice(impl_->agg, l, "aggregated");
}

ConstGradientView Runtime::residual(std::size_t l) const {
  const auto& s = *impl_;
  if (l >= s.layers.size()) return s.layer_slice(s.resid, l, "residual");  // throws
  return s.layer_slice(s.resid_of(s.plan.group_of_layer[l]), l, "residual");
}

void Runtime::begin_backward() noexcept {
  auto& s = *impl_;
  detail::CallGuard guard(s.in_call);
  if (!guard.ok) return;
  s.begin_s = detail::now_s();
  s.last_return_s = s.begin_s;
}

Status Runtime::ready(std::size_t l) noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) return Status::concurrent_call;
  if (!impl_->engine) return impl_->stopped_at_finalize();
  return impl_->ready(l);
}

Status Runtime::ready(std::size_t l, const ConstGradientView& grad) noexcept {
  auto& s = *impl_;
  detail::CallGuard guard(s.in_call);
  if (!guard.ok) return Status::concurrent_call;
  if (!s.engine) return s.stopped_at_finalize();
  if (l >= s.layers.size()) return s.ready(l);
  if (grad.extent(0) != s.layers[l].numel)
    return s.fail(Status::shape_mismatch,
                  "omgs: ready(" + std::to_string(l) + ", view): layer '" + s.layers[l].name +
                      "' has " + std::to_string(s.layers[l].numel) + " elements, the view " +
                      std::to_string(grad.extent(0)));
  if (s.is_ready[l]) return s.ready(l);
  Kokkos::deep_copy(s.layer_slice(s.grad, l, "ready"), grad);
  return s.ready(l);
}

IterationStats Runtime::finish() noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) {
    IterationStats r;
    r.status = Status::concurrent_call;
    return r;
  }
  if (!impl_->engine) {
    IterationStats r;
    r.status = impl_->stopped_at_finalize();
    return r;
  }
  return impl_->finish();
}

bool Runtime::profiling() const noexcept {
  return impl_->profiling;
}

const Timeline& Runtime::measured() const noexcept {
  return impl_->measured;
}

const Diagnosis& Runtime::last_diagnosis() const noexcept {
  return impl_->diagnosis;
}

const Plan& Runtime::plan() const noexcept {
  return impl_->plan;
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
  return impl_->last_refit;
}
const IterationStats& Runtime::last_stats() const noexcept {
  return impl_->stats;
}
RuntimeStats Runtime::stats() const {
  return {impl_->stats, impl_->measured, progress_stats()};
}
ProgressStats Runtime::progress_stats() const {
  return impl_->engine ? impl_->engine->stats() : ProgressStats{};
}
std::size_t Runtime::group_k(std::size_t g) const {
  return impl_->group_k.at(g);
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
