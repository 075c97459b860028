// The progress engine's driver: one collective per merged group, the one its wire posts
// (wire.hpp: the pairs' MPI_Iallgatherv, a dense group's MPI_Iallreduce, on the same
// communicator; a phased wire's steps, e.g. the sparse allreduce's, on its own, advanced beside
// them), in plan order, by a (pinned) progress thread or, in inline mode, by the owner's own
// calls; completions tested and handed back. Each group's DriverPhase (engine_impl.hpp) says
// where its exchange is. The owner's side is in engine_owner.cpp, the set-up in engine_setup.cpp,
// the watchdog protocol in watchdog.cpp.
#include <omgs/comm.hpp>

#include <algorithm>
#include <thread>

#include "comm/engine_impl.hpp"

namespace omgs::detail {

void EngineImpl::thread_main() {
  // Nothing to progress: spin briefly, yield, then sleep with a doubling period (bounded by
  // idle.max_sleep_s), so an idle thread leaves its core to the compute threads. While
  // collectives are in flight it polls every idle.sleep_s: MPI advances them only when polled.
  // An oversubscribed layout skips the spinning and yielding (idle_for_layout).
  Backoff backoff(idle_for_layout(options_.idle, layout_));
  while (!stop_.load(std::memory_order_acquire)) {
    if (pause_.load(std::memory_order_acquire)) {
      park();
      backoff.reset();
      continue;
    }
    if (step()) {
      backoff.reset();
    } else {
      backoff.pause(inflight_ > 0);
    }
  }
  drain(backoff);
}

void EngineImpl::drain(Backoff& backoff) noexcept {
  // Everything submitted before the stop is posted (in plan order) and waited for; a group
  // held back because an earlier one was never submitted is dropped on every rank alike.
  const auto deadline = deadline_after(options_.shutdown_timeout_s);
  for (;;) {
    const bool did = step();
    if (!did && inflight_ == 0 && submit_q_->empty_approx()) return;
    if (Clock::now() > deadline) return;
    if (did) {
      backoff.reset();
    } else {
      backoff.pause(inflight_ > 0);
    }
  }
}

bool EngineImpl::step() noexcept {
  bool did = false;
  int g = 0;
  while (submit_q_->try_pop(g)) {
    ready_[static_cast<std::size_t>(g)] = 1;
    did = true;
  }
  if (broken_ && fail_ready_groups()) did = true;
  // Plan order: group next_post_ first, whatever order the submissions came in. A post
  // that MPI refuses stays first in line and is retried after a short back-off.
  const bool may_post = retry_after_ == Clock::time_point{} || Clock::now() >= retry_after_;
  if (may_post && options_.variable_counts && post_pending_data()) did = true;
  while (may_post && ready_[static_cast<std::size_t>(next_post_)] != 0) {
    if (!post_first(next_post_)) break;
    ready_[static_cast<std::size_t>(next_post_)] = 0;
    if (next_post_ + 1 == num_groups_) {
      next_post_ = 0;
      ++cycle_;
    } else {
      ++next_post_;
    }
    did = true;
  }
  if (inflight_ > 0 && test_inflight()) did = true;
  if (phased_inflight_ > 0 && advance_phased()) did = true;
  if (service_watchdog()) did = true;
  return did;
}

/// After a collective completed in error: every group popped since fails at once.
bool EngineImpl::fail_ready_groups() noexcept {
  bool did = false;
  for (int h = 0; h < num_groups_; ++h) {
    GroupState& s = groups_[static_cast<std::size_t>(h)];
    if (ready_[static_cast<std::size_t>(h)] == 0) continue;
    ready_[static_cast<std::size_t>(h)] = 0;
    s.failed = true;
    ++inflight_;  // on_request_done accounts for it as a completion
    on_request_done(h);
    did = true;
  }
  return did;
}

/// MPI_Testsome over the groups in flight; true if any completed.
bool EngineImpl::test_inflight() noexcept {
  int outcount = 0;
  const int rc = MPI_Testsome(num_groups_, requests_.data(), &outcount, testsome_indices_.data(),
                              testsome_statuses_.data());
  if (rc != MPI_SUCCESS) mpi_errors_.fetch_add(1, std::memory_order_relaxed);
  // MPI_ERR_IN_STATUS: the completed requests carry their own error; any other error
  // leaves outcount meaningless and the requests untouched (tested again next pass).
  if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || outcount == MPI_UNDEFINED) return false;
  for (int i = 0; i < outcount; ++i) {
    const int g = testsome_indices_[static_cast<std::size_t>(i)];
    if (rc == MPI_ERR_IN_STATUS) {
      const int e = testsome_statuses_[static_cast<std::size_t>(i)].MPI_ERROR;
      if (e != MPI_SUCCESS) {
        // A collective that completed in error leaves this rank's collective stream
        // out of step with the others: the engine posts nothing more (every later
        // group fails at once) rather than risk matching the wrong exchange.
        note_mpi_error(e);
        groups_[static_cast<std::size_t>(g)].failed = true;
        broken_ = true;
      }
    }
    on_request_done(g);
  }
  return outcount > 0;
}

/// Phased wires in flight (a sparse allreduce's steps): each advances without blocking; true
/// if any completed. A failed one breaks the engine like a collective completed in error.
bool EngineImpl::advance_phased() noexcept {
  bool any = false;
  for (int g = 0; g < num_groups_; ++g) {
    GroupState& s = groups_[static_cast<std::size_t>(g)];
    if (s.phase != DriverPhase::phased_in_flight) continue;
    bool done = false;
    const int rc = s.wire->advance(s, done);
    if (rc != MPI_SUCCESS) {
      note_mpi_error(rc);
      s.failed = true;
      broken_ = true;
      done = true;
    }
    if (!done) continue;
    --phased_inflight_;
    on_request_done(g);
    any = true;
  }
  return any;
}

void EngineImpl::note_mpi_error(int code) noexcept {
  int cls = 0;
  MPI_Error_class(code, &cls);
  counters_.last_error_class.store(cls, std::memory_order_relaxed);
  mpi_errors_.fetch_add(1, std::memory_order_relaxed);
}

void EngineImpl::post_failed(int g, int rc) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  note_mpi_error(rc);
  counters_.post_errors.fetch_add(1, std::memory_order_relaxed);
  s.post_errors.fetch_add(1, std::memory_order_relaxed);
  requests_[static_cast<std::size_t>(g)] = MPI_REQUEST_NULL;
  retry_after_ = Clock::now() + std::chrono::milliseconds(1);
}

bool EngineImpl::post_pending_data() noexcept {
  bool did = false;
  while (groups_[static_cast<std::size_t>(next_data_)].phase == DriverPhase::counts_ready) {
    if (!post_data(next_data_)) break;  // it stays counts_ready: retried later
    next_data_ = next_data_ + 1 == num_groups_ ? 0 : next_data_ + 1;
    did = true;
  }
  return did;
}

bool EngineImpl::post_first(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  s.failed = false;
  if (options_.variable_counts && !s.wire->exchanges_counts()) {
    // No counts to exchange: the data waits for its turn on the data communicator behind
    // earlier groups whose counts are still in flight (plan order on every rank).
    s.phase = DriverPhase::counts_ready;
    post_pending_data();
  } else if (options_.variable_counts) {
    const int rc = MPI_Iallgather(&s.send_count, 1, MPI_UINT64_T, s.counts.data(), 1, MPI_UINT64_T,
                                  count_comm_.get(), &requests_[static_cast<std::size_t>(g)]);
    if (rc != MPI_SUCCESS) {
      post_failed(g, rc);
      return false;
    }
    s.phase = DriverPhase::counts_in_flight;
    collectives_posted_.fetch_add(1, std::memory_order_relaxed);
  } else if (!post_data(g)) {
    return false;
  }
  ++inflight_;
  s.posts.fetch_add(1, std::memory_order_relaxed);
  s.last_post_s.store(now_s(), std::memory_order_relaxed);
  s.post_seq.store(counters_.posted.fetch_add(1, std::memory_order_relaxed) + 1,
                   std::memory_order_relaxed);
  return true;
}

bool EngineImpl::post_data(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (options_.variable_counts && s.wire->exchanges_counts()) compute_displs(s);
  if (s.wire->blocks()) blocked_in_.store(g, std::memory_order_relaxed);
  const int rc = s.wire->post(wire_ctx_, s, &requests_[static_cast<std::size_t>(g)]);
  blocked_in_.store(-1, std::memory_order_relaxed);
  if (rc != MPI_SUCCESS) {
    post_failed(g, rc);
    return false;
  }
  if (s.wire->phased()) {
    s.phase = DriverPhase::phased_in_flight;
    ++phased_inflight_;
  } else {
    s.phase = DriverPhase::data_in_flight;
  }
  collectives_posted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

/// Counts arrived from every rank; each is <= k (enforced by submit on every rank), so the
/// prefix sums stay <= P*k (64-bit: the wire splits its posts past an int).
void EngineImpl::compute_displs(GroupState& s) noexcept {
  const std::uint64_t k = s.k;
  std::uint64_t offset = 0;
  for (int r = 0; r < ranks_; ++r) {
    std::uint64_t& c = s.counts[static_cast<std::size_t>(r)];
    if (c > k) {  // a peer's bug; never write past the buffer
      mpi_errors_.fetch_add(1, std::memory_order_relaxed);
      c = k;
    }
    s.displs[static_cast<std::size_t>(r)] = offset;
    offset += c;
  }
  s.total = offset;
}

void EngineImpl::on_request_done(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (s.phase == DriverPhase::counts_in_flight && !s.failed) {
    // Chained: counts known. Post pairs in plan order only (see count_comm_).
    s.phase = DriverPhase::counts_ready;
    post_pending_data();
    return;
  }
  s.phase = DriverPhase::idle;
  --inflight_;
  counters_.completed.fetch_add(1, std::memory_order_relaxed);
  s.completions.fetch_add(1, std::memory_order_relaxed);
  s.last_complete_s.store(now_s(), std::memory_order_relaxed);
  s.bytes_sent.fetch_add(s.wire->bytes_sent(s), std::memory_order_relaxed);
  s.bytes_received.fetch_add(s.wire->bytes_received(s), std::memory_order_relaxed);
  s.pairs_sent.fetch_add(s.wire->pairs_sent(s), std::memory_order_relaxed);
  s.pair_bytes_sent.fetch_add(s.wire->pair_bytes_sent(s), std::memory_order_relaxed);
  groups_completed_.fetch_add(1, std::memory_order_relaxed);
  // The queue's release/acquire hands counts/displs/total and the received data to the
  // owner. It cannot be full: at most one item per group is outstanding and cap >= 2G.
  while (!done_q_->try_push(g)) std::this_thread::yield();
}

// The watchdog (watchdog.cpp) is serviced by the driver in every step.

bool EngineImpl::service_watchdog() noexcept {
  bool did = watchdog_.answer_queries(counters_);
  // Acquire: group / timeout written by the owner.
  const DiagnosisState state = watchdog_.state();
  if (state == DiagnosisState::requested) {
    watchdog_.start(exchange_number(watchdog_.group()));
    did = true;
  } else if (state == DiagnosisState::running) {
    did = watchdog_.drive() || did;
  }
  return did;
}

/// The exchange group g waits for: the one posted for it, or (not posted here yet) the
/// number it will get in plan order.
std::uint64_t EngineImpl::exchange_number(int g) const noexcept {
  const GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (requests_[static_cast<std::size_t>(g)] != MPI_REQUEST_NULL ||
      s.phase == DriverPhase::counts_ready || s.phase == DriverPhase::phased_in_flight)
    return s.post_seq.load(std::memory_order_relaxed);
  const std::uint64_t cycle = g >= next_post_ ? cycle_ : cycle_ + 1;
  return cycle * static_cast<std::uint64_t>(num_groups_) + static_cast<std::uint64_t>(g) + 1;
}

}  // namespace omgs::detail
