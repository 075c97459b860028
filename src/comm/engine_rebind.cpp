// The progress engine takes a new set of groups while idle (rebind): its communicators,
// watchdog, datatype, pin and progress thread stay; only the per-group state, the
// driver's per-group arrays and the queues are replaced. A plan change costs the
// agreement on the new groups, not MPI_Comm_dup and a thread restart (docs/architecture.md).
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "comm/engine_impl.hpp"

namespace omgs::detail {

namespace {

constexpr const char* who = "omgs::ProgressEngine::rebind";

/// Resumes the parked progress thread on every path out of rebind().
class ResumeOnExit {
 public:
  explicit ResumeOnExit(std::function<void()> resume) : resume_(std::move(resume)) {}
  ~ResumeOnExit() { resume_(); }
  ResumeOnExit(const ResumeOnExit&) = delete;
  ResumeOnExit& operator=(const ResumeOnExit&) = delete;

 private:
  std::function<void()> resume_;
};

}  // namespace

/// This rank's verdict ("" if fine): the owner's thread, the engine running, every group
/// idle (each exchange submitted has been reported complete), so nothing is in flight.
std::string EngineImpl::rebind_precondition() const {
  if (std::this_thread::get_id() != owner_)
    return "called from a thread other than the one that created the engine";
  if (stopped_.load(std::memory_order_relaxed)) return "the engine is shut down";
  for (int g = 0; g < num_groups_; ++g)
    if (groups_[static_cast<std::size_t>(g)].state.load(std::memory_order_acquire) !=
        Submission::idle)
      return "group " + std::to_string(g) +
             " is submitted and not yet reported complete (wait for every group first)";
  if (!pending_.empty()) return "completions not yet collected by poll_completed()";
  return "";
}

/// Thread mode: asks the progress thread to park and waits (bounded) until it has.
bool EngineImpl::pause_driver(double timeout_s) {
  if (mode_ != ProgressMode::thread) return true;
  std::unique_lock<std::mutex> lock(park_mutex_);
  pause_.store(true, std::memory_order_release);
  return park_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                           [this] { return parked_; });
}

void EngineImpl::resume_driver() noexcept {
  if (mode_ != ProgressMode::thread) return;
  {
    std::lock_guard<std::mutex> lock(park_mutex_);
    pause_.store(false, std::memory_order_relaxed);
  }
  park_cv_.notify_all();
}

void EngineImpl::park() noexcept {
  std::unique_lock<std::mutex> lock(park_mutex_);
  parked_ = true;
  park_cv_.notify_all();
  park_cv_.wait(lock, [this] { return !pause_.load(std::memory_order_relaxed); });
  parked_ = false;
}

/// The numbering the watchdog compares across ranks restarts with the new groups, on every
/// rank at the same collective point, as in a new engine.
void EngineImpl::reset_driver_counters() noexcept {
  next_post_ = next_data_ = 0;
  cycle_ = 0;
  inflight_ = phased_inflight_ = 0;
  retry_after_ = {};
  collectives_posted_.store(0, std::memory_order_relaxed);
  groups_completed_.store(0, std::memory_order_relaxed);
  mpi_errors_.store(0, std::memory_order_relaxed);
  counters_.posted.store(0, std::memory_order_relaxed);
  counters_.completed.store(0, std::memory_order_relaxed);
  counters_.submitted.store(0, std::memory_order_relaxed);
  counters_.post_errors.store(0, std::memory_order_relaxed);
  counters_.last_error_class.store(0, std::memory_order_relaxed);
  epoch_s_ = now_s();
  for (int g = 0; g < num_groups_; ++g) {  // init_groups() set them to the previous epoch
    GroupState& s = groups_[static_cast<std::size_t>(g)];
    s.last_submit_s = s.last_post_s = s.last_complete_s = epoch_s_;
  }
}

/// Collective: every rank's verdict is agreed first, so a refusal (a rank busy, groups
/// that differ across ranks, a thread that did not park) throws on every rank and leaves
/// the engine posting its previous groups. The progress thread is parked while the
/// engine's collectives run and its state changes, and resumed on every path.
void EngineImpl::rebind(std::vector<GroupBuffers> groups) {
  std::string err = rebind_precondition();
  // Parked even when this rank refuses: the verdict's collective must not run beside the
  // driver's MPI calls (MPI_THREAD_SERIALIZED).
  const bool paused = pause_driver(options_.shutdown_timeout_s);
  ResumeOnExit resume([this] { resume_driver(); });
  if (err.empty() && !paused)
    err = "the progress thread did not pause within " +
          std::to_string(options_.shutdown_timeout_s) + " s (shutdown_timeout_s)";
  // Read after the park: the driver wrote it.
  if (err.empty() && broken_)
    err = "an earlier collective completed in error; the communicator is not reused";
  GroupSet next;
  if (err.empty()) err = make_group_set(groups, next);
  // A busy rank may have a group's collective in flight on comm_: the verdict goes over the
  // watchdog's communicator (point-to-point only), comm_ is used once all are idle.
  agree_on_groups(err, next.states.get(), next.count, who, watchdog_.comm());
  init_groups(next.states.get(), next.count, next.staging);
  groups_ = std::move(next.states);
  num_groups_ = next.count;
  staging_ = next.staging;
  init_driver_state();
  pending_.clear();
  reset_driver_counters();
  ++group_sets_;
}

}  // namespace omgs::detail
