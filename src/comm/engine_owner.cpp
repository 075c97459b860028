// The progress engine's owner side: submit, poll, wait, diagnose, statistics, and the
// public ProgressEngine that forwards to it.
#include <omgs/comm.hpp>

#include <algorithm>
#include <thread>

#include "comm/engine_impl.hpp"

namespace omgs::detail {

SubmitStatus EngineImpl::submit(int g, std::size_t count) noexcept {
  if (g < 0 || g >= num_groups_) return SubmitStatus::bad_group;
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (count > s.k || (!options_.variable_counts && count != s.k)) {
    return SubmitStatus::bad_group;
  }
  if (stop_.load(std::memory_order_relaxed) || stopped_.load(std::memory_order_relaxed)) {
    return SubmitStatus::stopped;
  }
  Submission expected = Submission::idle;
  // Acquire: pairs with the owner's release when it reported the previous completion,
  // so the driver is done with the buffers before we overwrite send_count / the mirror.
  if (!s.state.compare_exchange_strong(expected, Submission::submitted, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    return SubmitStatus::busy;
  }
  s.send_count = count;
  counters_.submitted.fetch_add(1, std::memory_order_relaxed);
  if (staging_) s.wire->stage_out(options_.copy_to_host, count);
  s.last_submit_s.store(now_s(), std::memory_order_relaxed);
  if (!submit_q_->try_push(g)) {
    s.state.store(Submission::idle, std::memory_order_release);
    return SubmitStatus::queue_full;
  }
  return SubmitStatus::ok;
}

bool EngineImpl::progress() noexcept {
  if (mode_ != ProgressMode::inline_) return false;
  return step();
}

void EngineImpl::finish_group_owner(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (staging_) s.wire->stage_in(options_.copy_to_device, s);
}

bool EngineImpl::pop_completion(int& g) noexcept {
  if (!pending_.empty()) {
    g = pending_.front();
    pending_.erase(pending_.begin());
    return true;
  }
  if (done_q_->try_pop(g)) {
    finish_group_owner(g);
    return true;
  }
  return false;
}

bool EngineImpl::poll_completed(int& g) noexcept {
  if (mode_ == ProgressMode::inline_) step();
  if (!pop_completion(g)) return false;
  // Release: the next submit(g) (acquire CAS) sees that we are done with the group.
  groups_[static_cast<std::size_t>(g)].state.store(Submission::idle, std::memory_order_release);
  return true;
}

WaitStatus EngineImpl::wait(int g, double timeout_s) noexcept {
  if (g < 0 || g >= num_groups_) return WaitStatus::not_submitted;
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (s.state.load(std::memory_order_acquire) == Submission::idle) return WaitStatus::not_submitted;
  auto it = std::find(pending_.begin(), pending_.end(), g);
  if (it != pending_.end()) {
    pending_.erase(it);
    s.state.store(Submission::idle, std::memory_order_release);
    return s.failed ? WaitStatus::failed : WaitStatus::ok;
  }
  if (timeout_s < 0) timeout_s = options_.wait_timeout_s;
  const auto deadline = deadline_after(timeout_s);
  // With a progress thread, an oversubscribed layout's wait sleeps at once (idle_for_layout).
  Backoff backoff(mode_ == ProgressMode::thread ? idle_for_layout(options_.idle, layout_)
                                                : options_.idle);
  for (;;) {
    bool did = mode_ == ProgressMode::inline_ ? step() : false;
    int done = 0;
    while (done_q_->try_pop(done)) {
      did = true;
      finish_group_owner(done);
      if (done == g) {
        s.state.store(Submission::idle, std::memory_order_release);
        return s.failed ? WaitStatus::failed : WaitStatus::ok;
      }
      pending_.push_back(done);  // capacity reserved: never allocates
    }
    if (did) {
      backoff.reset();
    } else {
      // The deadline is checked on every empty poll: a zero timeout is a single test.
      if (Clock::now() > deadline) return WaitStatus::timeout;
      backoff.pause(mode_ == ProgressMode::inline_ && inflight_ > 0);  // inline: we drive MPI
    }
  }
}

WaitStatus EngineImpl::wait_all(double timeout_s) noexcept {
  WaitStatus result = WaitStatus::ok;
  if (timeout_s < 0) timeout_s = options_.wait_timeout_s;
  const auto deadline = deadline_after(timeout_s);
  for (int g = 0; g < num_groups_; ++g) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    const WaitStatus st = wait(g, std::max(0.0, left));
    if (st == WaitStatus::timeout) return st;
    if (st == WaitStatus::failed) result = st;
  }
  return result;
}

Diagnosis EngineImpl::diagnose(int g, double timeout_s) {
  Diagnosis d;
  d.group = g;
  if (g < 0 || g >= num_groups_) {
    d.report = "omgs: watchdog: group " + std::to_string(g) + " does not exist";
    return d;
  }
  if (!(timeout_s > 0)) timeout_s = 1.0;
  if (!watchdog_.request(g, timeout_s)) {
    d.report = "omgs: watchdog: a diagnosis is already running";
    return d;
  }
  // The driver runs it; in inline mode that is us.
  const auto give_up = deadline_after(timeout_s + 5.0);
  Backoff backoff(options_.idle);
  while (!watchdog_.answered()) {
    if (mode_ == ProgressMode::inline_ && step()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
    const int blocked = blocked_in_.load(std::memory_order_relaxed);
    if (blocked >= 0 && Clock::now() > give_up - std::chrono::seconds(5)) {  // after timeout_s
      d.report = "omgs: watchdog: group " + std::to_string(g) +
                 " stalled: this rank's progress thread is blocked in group " +
                 std::to_string(blocked) +
                 "'s MPI_Allreduce (dense_allreduce = blocking) and cannot ask the other "
                 "ranks; a rank that has not submitted group " +
                 std::to_string(blocked) + " holds it";
      return d;  // leaves the request set: the thread answers it once the allreduce returns
    }
    if (Clock::now() > give_up) {
      d.report = "omgs: watchdog: this rank's progress thread did not run the diagnosis";
      return d;  // leaves the request set: the thread is stuck, no second diagnosis
    }
  }
  return watchdog_.collect(g, num_groups_, counters_);
}

GroupStats EngineImpl::group_stats(int g) const noexcept {
  GroupStats o;
  if (g < 0 || g >= num_groups_) return o;
  const GroupState& s = groups_[static_cast<std::size_t>(g)];
  auto since_epoch = [this](double t) { return t - epoch_s_; };
  o.posts = s.posts.load(std::memory_order_relaxed);
  o.completions = s.completions.load(std::memory_order_relaxed);
  // Seconds since engine creation (init_groups() starts every time at the epoch).
  o.last_submit_s = since_epoch(s.last_submit_s.load(std::memory_order_relaxed));
  o.last_post_s = since_epoch(s.last_post_s.load(std::memory_order_relaxed));
  o.last_complete_s = since_epoch(s.last_complete_s.load(std::memory_order_relaxed));
  o.bytes_sent = s.bytes_sent.load(std::memory_order_relaxed);
  o.bytes_received = s.bytes_received.load(std::memory_order_relaxed);
  o.post_errors = s.post_errors.load(std::memory_order_relaxed);
  o.pairs_sent = s.pairs_sent.load(std::memory_order_relaxed);
  o.pair_bytes_sent = s.pair_bytes_sent.load(std::memory_order_relaxed);
  return o;
}

GroupTimes EngineImpl::group_times(int g) const noexcept {
  GroupTimes t;
  if (g < 0 || g >= num_groups_) return t;
  const GroupState& s = groups_[static_cast<std::size_t>(g)];
  t.submit_s = s.last_submit_s.load(std::memory_order_relaxed);
  t.post_s = s.last_post_s.load(std::memory_order_relaxed);
  t.complete_s = s.last_complete_s.load(std::memory_order_relaxed);
  return t;
}

ProgressStats EngineImpl::stats() const {
  ProgressStats out;
  out.mode = mode_;
  out.mpi_thread_level = thread_level_;
  out.pinned_pu = pinned_pu_;
  out.pin_note = pin_note_;
  out.gpu_aware_mpi = gpu_aware_;
  out.staging = staging_;
  out.variable_counts = options_.variable_counts;
  out.ranks = ranks_;
  out.ranks_per_node = node_comms_.ranks_per_node();
  out.nodes = node_comms_.nodes();
  out.nodes_equal = node_comms_.unequal().empty();
  out.collectives_posted = collectives_posted_.load(std::memory_order_relaxed);
  out.groups_completed = groups_completed_.load(std::memory_order_relaxed);
  out.mpi_errors = mpi_errors_.load(std::memory_order_relaxed);
  out.queries_answered = watchdog_.queries_answered();
  out.group_sets = group_sets_;
  out.groups.resize(static_cast<std::size_t>(num_groups_));
  for (int g = 0; g < num_groups_; ++g) {
    GroupStats& o = out.groups[static_cast<std::size_t>(g)];
    o = group_stats(g);
    out.bytes_sent += o.bytes_sent;
    out.bytes_received += o.bytes_received;
  }
  return out;
}

}  // namespace omgs::detail

namespace omgs {

ProgressEngine::ProgressEngine(MPI_Comm comm, std::vector<GroupBuffers> groups,
                               ProgressOptions options)
    : impl_(std::make_unique<detail::EngineImpl>(comm, std::move(groups), std::move(options))) {}

ProgressEngine::~ProgressEngine() = default;

void ProgressEngine::rebind(std::vector<GroupBuffers> groups) {
  impl_->rebind(std::move(groups));
}

SubmitStatus ProgressEngine::submit(int g) noexcept {
  if (g < 0 || g >= impl_->num_groups_) return SubmitStatus::bad_group;
  return impl_->submit(g, impl_->groups_[static_cast<std::size_t>(g)].k);
}
SubmitStatus ProgressEngine::submit(int g, std::size_t count) noexcept {
  return impl_->submit(g, count);
}
bool ProgressEngine::progress() noexcept {
  return impl_->progress();
}
bool ProgressEngine::poll_completed(int& g) noexcept {
  return impl_->poll_completed(g);
}
WaitStatus ProgressEngine::wait(int g, double timeout_s) noexcept {
  return impl_->wait(g, timeout_s);
}
WaitStatus ProgressEngine::wait_all(double timeout_s) noexcept {
  return impl_->wait_all(timeout_s);
}
Diagnosis ProgressEngine::diagnose(int g, double timeout_s) {
  return impl_->diagnose(g, timeout_s);
}
bool ProgressEngine::failed(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return false;
  return impl_->groups_[static_cast<std::size_t>(g)].failed;
}
GroupTimes ProgressEngine::group_times(int g) const noexcept {
  return impl_->group_times(g);
}
GroupStats ProgressEngine::group_stats(int g) const noexcept {
  return impl_->group_stats(g);
}

const std::uint64_t* ProgressEngine::recv_counts(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return nullptr;
  return impl_->groups_[static_cast<std::size_t>(g)].counts.data();
}
const std::uint64_t* ProgressEngine::recv_displs(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return nullptr;
  return impl_->groups_[static_cast<std::size_t>(g)].displs.data();
}
std::size_t ProgressEngine::recv_total(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return 0;
  return static_cast<std::size_t>(impl_->groups_[static_cast<std::size_t>(g)].total);
}
std::size_t ProgressEngine::dropped_total(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return 0;
  return impl_->groups_[static_cast<std::size_t>(g)].wire->dropped();
}
int ProgressEngine::num_groups() const noexcept {
  return impl_->num_groups_;
}
int ProgressEngine::ranks() const noexcept {
  return impl_->ranks_;
}
int ProgressEngine::rank() const noexcept {
  return impl_->rank_;
}
ProgressMode ProgressEngine::mode() const noexcept {
  return impl_->mode_;
}
int ProgressEngine::pinned_pu() const noexcept {
  return impl_->pinned_pu_;
}
ProgressStats ProgressEngine::stats() const {
  return impl_->stats();
}

}  // namespace omgs
