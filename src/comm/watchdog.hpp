// Internal: the watchdog protocol of the progress engine. Every engine keeps one receive
// posted for queries on a communicator of its own; the driver (progress thread, or the
// owner in inline mode) answers each with this rank's counters. A rank whose wait timed
// out asks every other rank and waits a bounded time for the answers (docs/reliability.md).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include <omgs/comm.hpp>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"

namespace omgs::detail {

/// How far this rank got, as the watchdog reports it. Written by the driver, read by
/// anyone (relaxed atomics).
struct ProgressCounters {
  std::atomic<std::uint64_t> posted{0}, completed{0}, submitted{0}, post_errors{0};
  std::atomic<int> last_error_class{0};
  PeerProgress snapshot(int rank) const noexcept;
};

/// A watchdog reply on the wire (MPI_UNSIGNED_LONG_LONG x 6).
struct WatchReply {
  unsigned long long round = 0, posted = 0, completed = 0, submitted = 0, post_errors = 0,
                     last_error_class = 0;
};

/// Where this rank's own diagnosis stands. The owner moves idle -> requested and
/// answered -> idle, the driver requested -> running -> answered; the moves that hand the
/// diagnosis to the other side (all but running) are release stores.
enum class DiagnosisState : int {
  idle,       ///< no diagnosis asked for: the driver only answers other ranks' queries
  requested,  ///< the owner asked for a diagnosis of group(); the driver starts it
  running,    ///< the queries are out; the driver collects the answers
  answered,   ///< the answers are in (or time is up); the owner collects them
};

class Watchdog {
 public:
  /// Collective over `comm` (duplicates it); posts the receive for queries.
  explicit Watchdog(MPI_Comm comm);
  ~Watchdog();  // cancels the query receive, gives replies in flight a moment
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // [P] the driver
  bool answer_queries(const ProgressCounters& counters) noexcept;
  /// Acquire: what the other side wrote before its last hand-over is visible.
  DiagnosisState state() const noexcept { return state_.load(std::memory_order_acquire); }
  int group() const noexcept { return group_; }
  /// Sends the queries of a new round; `needed` is the exchange number the group waits for.
  void start(std::uint64_t needed) noexcept;
  bool drive() noexcept;  // collects answers; publishes them when all came or time is up

  // [O] the owner
  bool request(int g, double timeout_s) noexcept;  // false: a diagnosis is already running
  bool answered() const noexcept { return state() == DiagnosisState::answered; }
  /// The answers of the round just finished, with the report; readies the next round.
  Diagnosis collect(int g, int num_groups, const ProgressCounters& own);

  /// Its communicator: point-to-point only, so a collective on it (rebind()'s verdict)
  /// never meets a group's collective still in flight on the engine's.
  MPI_Comm comm() const noexcept { return comm_.get(); }

  std::uint64_t queries_answered() const noexcept {
    return queries_answered_.load(std::memory_order_relaxed);
  }

 private:
  void post_query_receive() noexcept;
  void post_reply_receive(int r) noexcept;

  OwnedComm comm_;
  int rank_ = 0, ranks_ = 1;
  std::atomic<std::uint64_t> queries_answered_{0};
  // [P] answering: a receive for queries is always posted; one reply slot per peer.
  MPI_Request query_req_ = MPI_REQUEST_NULL;
  unsigned long long query_buf_ = 0;
  std::vector<WatchReply> reply_buf_;
  std::vector<MPI_Request> reply_req_;
  // Our own diagnosis: [O] requests it, [P] runs it and publishes the answers (release;
  // [O] acquires and reads them, then resets to idle).
  std::atomic<DiagnosisState> state_{DiagnosisState::idle};
  int group_ = -1;                // [O] writes before the release store of `requested`
  double timeout_s_ = 1;          // [O] likewise
  std::uint64_t needed_ = 0;      // [P]
  unsigned long long round_ = 0;  // [P]
  Clock::time_point deadline_{};
  std::vector<MPI_Request> send_req_, recv_req_;
  std::vector<WatchReply> recv_buf_;
  std::vector<char> got_;
};

/// The paragraph of a diagnosis: the group, and the ranks that hold it up and why.
std::string watchdog_report(const Diagnosis& d, int rank, int num_groups);

}  // namespace omgs::detail
