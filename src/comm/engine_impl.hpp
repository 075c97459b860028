// Internal: the progress engine's state, shared by its set-up (engine_setup.cpp), its hot
// path (progress_engine.cpp), the wires it posts (wire*.cpp) and the watchdog protocol
// (watchdog.cpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/queue.hpp>

#include "comm/backoff.hpp"
#include "comm/clock.hpp"
#include "comm/collectives.hpp"
#include "comm/layout.hpp"
#include "comm/machine_ranks.hpp"
#include "comm/node_comms.hpp"
#include "comm/pinning.hpp"
#include "comm/watchdog.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

/// Whether a group's exchange is the submitter's to start: submit() moves idle -> submitted
/// (acquire), the owner moves it back once it has reported the completion (release).
enum class Submission : int {
  idle,       ///< no exchange outstanding: the buffers are the owner's
  submitted,  ///< submitted, not yet reported complete to the owner
};

/// Where a group's exchange is in the driver ([P]). The request slot of the phases in
/// flight on MPI is EngineImpl::requests_[g] (one array, for MPI_Testsome).
enum class DriverPhase : std::uint8_t {
  idle,              ///< nothing posted (not submitted, or completed)
  counts_in_flight,  ///< variable counts: the count MPI_Iallgather is in flight
  counts_ready,      ///< counts arrived (or none to exchange): the data waits for plan order
  data_in_flight,    ///< the wire's data collective is in flight (its request)
  phased_in_flight,  ///< a phased wire's exchange is in flight (Wire::advance)
};

/// Per-group state. Fields marked [P] belong to whoever drives MPI (the progress thread,
/// or the owner in inline mode); [O] to the owner; [S] written by the submitter before
/// the submit-queue push and read by [P] after the pop (the queue's release/acquire
/// orders them).
struct GroupState {
  std::unique_ptr<Wire> wire;  // what the group posts (its collective and its buffers)
  WireKind kind = WireKind::allgather_pairs;  // the caller's GroupBuffers::kind (agreed)
  std::size_t k = 0;                          // wire->k(): the most items a submit may count
  // Counts and offsets are 64-bit: P k may pass an int (a wire splits its posts where MPI's
  // counts are ints: wire_allgatherv.cpp).
  std::vector<std::uint64_t> counts;      // [P] per-rank counts of the exchange in flight / last
  std::vector<std::uint64_t> displs;      // [P]
  std::uint64_t send_count = 0;           // [S]
  std::uint64_t total = 0;                // [P] pairs received in the last exchange
  DriverPhase phase = DriverPhase::idle;  // [P]
  std::atomic<Submission> state{Submission::idle};
  bool failed = false;  // [P] MPI reported an error completing the exchange (read by [O]
                        // after the completion-queue pop, which orders it)
  // Statistics, relaxed atomics: written by [P] / submitter, read by stats().
  std::atomic<std::uint64_t> posts{0}, completions{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<std::uint64_t> post_errors{0};
  std::atomic<std::uint64_t> pairs_sent{0}, pair_bytes_sent{0};
  std::atomic<std::uint64_t> post_seq{0};  // [P] writes: the exchange's number (1-based)
  std::atomic<double> last_submit_s{0}, last_post_s{0}, last_complete_s{0};  // now_s()
};

/// The MPI datatype of a SparsePair (uint32 index + float value), freed on destruction.
class PairType {
 public:
  PairType();
  ~PairType();
  PairType(const PairType&) = delete;
  PairType& operator=(const PairType&) = delete;
  MPI_Datatype get() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

/// A set of groups the engine posts: their state and wires, and whether they stage.
struct GroupSet {
  std::unique_ptr<GroupState[]> states;
  int count = 0;
  bool staging = false;
};

class EngineImpl {
 public:
  EngineImpl(MPI_Comm user_comm, std::vector<GroupBuffers> groups, ProgressOptions options);
  ~EngineImpl();

  SubmitStatus submit(int g, std::size_t count) noexcept;
  bool progress() noexcept;
  bool poll_completed(int& g) noexcept;
  WaitStatus wait(int g, double timeout_s) noexcept;
  WaitStatus wait_all(double timeout_s) noexcept;
  Diagnosis diagnose(int g, double timeout_s);
  GroupTimes group_times(int g) const noexcept;
  GroupStats group_stats(int g) const noexcept;
  ProgressStats stats() const;
  /// Collective: the engine posts `groups` from now on (engine_rebind.cpp).
  void rebind(std::vector<GroupBuffers> groups);

  // Declared first: set by configure(), before the members below are constructed.
  int num_groups_ = 0;
  int ranks_ = 0;
  int rank_ = 0;
  ProgressMode mode_ = ProgressMode::inline_;
  int pinned_pu_ = -1;
  std::unique_ptr<GroupState[]> groups_;

 private:
  // Set-up steps (engine_setup.cpp).
  ProgressOptions configure(MPI_Comm user_comm, ProgressOptions options);
  std::string validate_groups(const std::vector<GroupBuffers>& groups);
  std::string make_group_set(const std::vector<GroupBuffers>& groups, GroupSet& out) const;
  void compute_displs(GroupState& s) noexcept;  // variable counts: from the arrived counts
  /// Collective; `name` (the engine's constructor or rebind) prefixes the errors; the
  /// verdicts are agreed on `verdict_comm`, the rest on comm_ once every rank is known idle.
  void agree_on_groups(const std::string& local_error, const GroupState* states, int count,
                       const char* name, MPI_Comm verdict_comm);
  void init_groups(GroupState* states, int count, bool staging);
  void init_driver_state();
  RankLayout measure_layout(const MachineRanks& machine);
  void start_progress(const MachineRanks& machine);
  void shutdown() noexcept;
  // rebind() (engine_rebind.cpp): this rank's verdict on taking new groups now, and the
  // progress thread parked while the engine's state changes under it.
  std::string rebind_precondition() const;
  bool pause_driver(double timeout_s);
  void resume_driver() noexcept;
  void park() noexcept;  // [P] waits while pause_ is set
  void reset_driver_counters() noexcept;

  bool step() noexcept;               // [P] one pass: pop submissions, post in order, test
  bool fail_ready_groups() noexcept;  // after a failed completion
  bool test_inflight() noexcept;
  bool advance_phased() noexcept;   // phased wires in flight: advance each
  bool post_first(int g) noexcept;  // false: MPI refused, retried later
  bool post_data(int g) noexcept;
  void post_failed(int g, int rc) noexcept;
  void note_mpi_error(int code) noexcept;  // counts it, keeps its class for the watchdog
  bool post_pending_data() noexcept;
  bool service_watchdog() noexcept;  // [P] answer queries, drive our own diagnosis
  std::uint64_t exchange_number(int g) const noexcept;
  void on_request_done(int g) noexcept;
  void finish_group_owner(int g) noexcept;  // [O] staging copy-back after completion
  bool pop_completion(int& g) noexcept;     // [O] from the pending list or the queue
  void thread_main();
  /// [P] after the stop: steps until everything submitted has completed, or until
  /// shutdown_timeout_s has passed.
  void drain(Backoff& backoff) noexcept;

  std::string pin_what_ = "options.pin";  // what chose the pin, for messages
  std::string pin_note_;
  int thread_level_ = MPI_THREAD_SINGLE;
  ProgressOptions options_;  // configure(): checked, with the environment applied
  double epoch_s_ = now_s();
  // Variable counts: the count exchanges run on their own communicator. Counts of
  // group g+1 may be posted before the pairs of g on one rank and after on another, and
  // MPI requires the same collective order on a communicator; per communicator both
  // streams are in plan order.
  OwnedComm comm_, count_comm_;
  // The node and rail communicators of the two-level wires (made once; every wire shares them).
  NodeComms node_comms_;
  // Every phased wire's point-to-point steps, each group on tags of its own (WireContext):
  // a fixed number of communicators per engine, however many groups.
  OwnedComm phased_comm_;
  // The watchdog's point-to-point queries and replies, apart from the collectives.
  Watchdog watchdog_;
  PairType pair_type_;
  WireContext wire_ctx_;  // what every group's wire posts on (init_driver_state)
  bool gpu_aware_ = false;
  bool staging_ = false;

  std::unique_ptr<BoundedQueue<int>> submit_q_;
  std::unique_ptr<BoundedQueue<int>> done_q_;

  // [P] state
  std::vector<MPI_Request> requests_;  // one slot per group, MPI_REQUEST_NULL when idle
  std::vector<int> testsome_indices_;
  std::vector<unsigned char> ready_;  // popped from the submit queue, not yet posted
  std::vector<MPI_Status> testsome_statuses_;
  int next_post_ = 0;  // plan order: the next group to post
  int next_data_ = 0;  // variable counts: the next group whose pairs to post
  int inflight_ = 0;
  int phased_inflight_ = 0;          // of which phased wires (advance_phased)
  std::uint64_t cycle_ = 0;          // completed rounds of next_post_ through all groups
  Clock::time_point retry_after_{};  // after a failed post: back off before the retry
  bool broken_ = false;              // a collective completed in error: post nothing more
  // collectives_posted_: +1 per data collective (post_data: the group's wire) and per count
  // MPI_Iallgather (post_first); see ProgressStats::collectives_posted.
  std::atomic<std::uint64_t> collectives_posted_{0}, groups_completed_{0}, mpi_errors_{0};
  // [P] writes: the group whose blocking post() (Wire::blocks) the driver is in, else -1;
  // diagnose() names it, as the blocked driver cannot run the watchdog's queries.
  std::atomic<int> blocked_in_{-1};
  ProgressCounters counters_;  // what the watchdog reports

  // [O] completions popped by wait(g) for other groups, kept for poll_completed.
  std::vector<int> pending_;

  std::unique_ptr<Pinner> pinner_;
  RankLayout layout_;  // thread mode: what the automatic pin decided on
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
  // rebind(): the owner sets pause_ (under park_mutex_) and waits for parked_; the thread
  // parks at the top of its loop until pause_ is cleared. The mutex orders the owner's
  // changes to the engine's state before the thread's next step.
  std::atomic<bool> pause_{false};
  bool parked_ = false;  // guarded by park_mutex_
  std::mutex park_mutex_;
  std::condition_variable park_cv_;
  std::uint64_t group_sets_ = 1;  // [O] sets of groups taken: construction, + 1 per rebind()
  std::thread::id owner_ = std::this_thread::get_id();  // the creating thread: rebind() checks
  bool leaked_ = false;
};

}  // namespace omgs::detail
