// The progress engine: one MPI_Iallgatherv per merged group, posted in plan order by a
// (pinned) progress thread or, in inline mode, by the owner's own calls.
#include <omgs/comm.hpp>
#include <omgs/queue.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "pinning.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OMGS_CPU_RELAX() _mm_pause()
#else
#define OMGS_CPU_RELAX() ((void)0)
#endif

namespace omgs::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::size_t next_pow2(std::size_t n) {
  std::size_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

const char* thread_level_name(int level) {
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  return "MPI_THREAD_SINGLE";
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

/// Per-group state. Fields marked [P] belong to whoever drives MPI (the progress thread,
/// or the owner in inline mode); [O] to the owner; [S] written by the submitter before
/// the submit-queue push and read by [P] after the pop (the queue's release/acquire
/// orders them).
struct GroupState {
  GroupBuffers buf;
  const SparsePair* mpi_send = nullptr;  // buf.send or the host mirror
  SparsePair* mpi_recv = nullptr;        // buf.recv or the host mirror
  std::vector<SparsePair> host_send;     // staging mirrors (empty unless staging)
  std::vector<SparsePair> host_recv;
  std::vector<int> counts;    // [P] per-rank counts of the exchange in flight / last
  std::vector<int> displs;    // [P]
  int send_count = 0;         // [S]
  int total = 0;              // [P] pairs received in the last exchange
  bool counts_phase = false;  // [P] the count MPI_Iallgather is in flight
  bool counts_ready = false;  // [P] counts arrived, data not yet posted (waits for plan order)
  // 0 idle, 1 submitted (not yet reported complete to the owner).
  std::atomic<int> state{0};
  bool failed = false;  // [P] MPI reported an error completing the exchange (read by [O]
                        // after the completion-queue pop, which orders it)
  // Statistics, relaxed atomics: written by [P] / submitter, read by stats().
  std::atomic<std::uint64_t> posts{0}, completions{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<std::uint64_t> post_errors{0};
  std::atomic<std::uint64_t> post_seq{0};  // [P] writes: the exchange's number (1-based)
  std::atomic<double> last_submit_s{0}, last_post_s{0}, last_complete_s{0};
};

/// A watchdog reply on the wire (MPI_UNSIGNED_LONG_LONG x 6).
struct WatchReply {
  unsigned long long round = 0, posted = 0, completed = 0, submitted = 0, post_errors = 0,
                     last_error_class = 0;
};
constexpr int watch_reply_count = 6;
constexpr int tag_query = 1;
constexpr int tag_reply = 2;

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
  ProgressStats stats() const;

  int num_groups_ = 0;
  int ranks_ = 0;
  int rank_ = 0;
  ProgressMode mode_ = ProgressMode::inline_;
  int pinned_pu_ = -1;
  std::unique_ptr<GroupState[]> groups_;

 private:
  double now_s() const noexcept {
    return std::chrono::duration<double>(Clock::now() - epoch_).count();
  }
  bool step() noexcept;             // [P] one pass: pop submissions, post in order, test
  bool post_first(int g) noexcept;  // false: MPI refused, retried later
  bool post_data(int g) noexcept;
  void post_failed(int g, int rc) noexcept;
  void note_mpi_error(int code) noexcept;  // counts it, keeps its class for the watchdog
  bool post_pending_data() noexcept;
  bool service_watchdog() noexcept;  // [P] answer queries, drive our own diagnosis
  void answer_query(int source) noexcept;
  void start_diagnosis() noexcept;
  bool drive_diagnosis() noexcept;
  void on_request_done(int g) noexcept;
  void finish_group_owner(int g) noexcept;  // [O] staging copy-back after completion
  bool pop_completion(int& g) noexcept;     // [O] from the pending list or the queue
  void thread_main();
  void shutdown() noexcept;

  ProgressOptions options_;
  Clock::time_point epoch_ = Clock::now();
  MPI_Comm comm_ = MPI_COMM_NULL;
  // Variable counts: the count exchanges run on their own communicator. Counts of
  // group g+1 may be posted before the pairs of g on one rank and after on another, and
  // MPI requires the same collective order on a communicator; per communicator both
  // streams are in plan order.
  MPI_Comm count_comm_ = MPI_COMM_NULL;
  // The watchdog's point-to-point queries and replies, apart from the collectives.
  MPI_Comm watch_comm_ = MPI_COMM_NULL;
  MPI_Datatype pair_type_ = MPI_DATATYPE_NULL;
  int thread_level_ = MPI_THREAD_SINGLE;
  bool gpu_aware_ = false;
  bool staging_ = false;
  std::string pin_note_;

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
  std::uint64_t cycle_ = 0;          // completed rounds of next_post_ through all groups
  Clock::time_point retry_after_{};  // after a failed post: back off before the retry
  bool broken_ = false;              // a collective completed in error: post nothing more
  std::atomic<std::uint64_t> collectives_posted_{0}, groups_completed_{0}, mpi_errors_{0};
  std::atomic<std::uint64_t> posted_{0}, completed_{0}, submitted_{0}, post_errors_{0};
  std::atomic<int> last_error_class_{0};
  std::atomic<std::uint64_t> queries_answered_{0};

  // [P] watchdog: a receive for queries is always posted; one reply slot per peer.
  MPI_Request query_req_ = MPI_REQUEST_NULL;
  unsigned long long query_buf_ = 0;
  std::vector<WatchReply> reply_buf_;
  std::vector<MPI_Request> reply_req_;
  // Our own diagnosis: [O] requests it (diag_state_ 0 -> 1), [P] runs it (2) and
  // publishes the answers (3, release; [O] acquires and reads them, then resets to 0).
  std::atomic<int> diag_state_{0};
  int diag_group_ = -1;                // [O] writes before the release store of state 1
  double diag_timeout_s_ = 1;          // [O] likewise
  std::uint64_t diag_needed_ = 0;      // [P]
  unsigned long long diag_round_ = 0;  // [P]
  Clock::time_point diag_deadline_{};
  std::vector<MPI_Request> diag_send_req_, diag_recv_req_;
  std::vector<WatchReply> diag_recv_buf_;
  std::vector<char> diag_got_;

  // [O] completions popped by wait(g) for other groups, kept for poll_completed.
  std::vector<int> pending_;

  std::unique_ptr<Pinner> pinner_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
  std::thread::id owner_;
  bool leaked_ = false;
};

EngineImpl::EngineImpl(MPI_Comm user_comm, std::vector<GroupBuffers> groups,
                       ProgressOptions options)
    : options_(std::move(options)) {
  const char* who = "omgs::ProgressEngine";
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    throw Error(std::string(who) +
                ": MPI is not initialized (call MPI_Init_thread before creating the engine)");
  }
  if (mpi_finalized()) throw Error(std::string(who) + ": MPI is already finalized");
  if (user_comm == MPI_COMM_NULL)
    throw Error(std::string(who) + ": the communicator is MPI_COMM_NULL");
  owner_ = std::this_thread::get_id();

  // Environment overrides (before any collective, so a bad value fails on every rank
  // that has it without leaving others in a collective; job scripts set them uniformly).
  std::string pin_what = "options.pin";
  if (options_.read_environment) {
    if (const char* v = std::getenv("OMGS_PROGRESS_CPU"); v != nullptr && *v != '\0') {
      options_.pin = parse_pin_option(v, "OMGS_PROGRESS_CPU");
      pin_what = "OMGS_PROGRESS_CPU";
    }
    if (const char* v = std::getenv("OMGS_GPU_AWARE_MPI"); v != nullptr && *v != '\0') {
      options_.gpu_aware = parse_gpu_aware_option(v, "OMGS_GPU_AWARE_MPI");
    }
  }

  MPI_Query_thread(&thread_level_);
  mode_ = (thread_level_ >= MPI_THREAD_SERIALIZED && !options_.force_inline)
              ? ProgressMode::thread
              : ProgressMode::inline_;
  if (mode_ == ProgressMode::inline_ && thread_level_ < MPI_THREAD_SERIALIZED) {
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    if (!is_main) {
      throw Error(std::string(who) + ": MPI was initialized with " +
                  thread_level_name(thread_level_) +
                  " and the engine is created on a thread that is not MPI's main thread");
    }
  }

  MPI_Comm_dup(user_comm, &comm_);
  MPI_Comm_dup(user_comm, &count_comm_);
  MPI_Comm_dup(user_comm, &watch_comm_);
  // Errors come back as return codes on our communicators (whatever the user's handler):
  // a failed post is retried, a failed completion fails the group, never the process.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(count_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(watch_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &ranks_);
  MPI_Comm_rank(comm_, &rank_);

  // Local validation; the verdict is agreed on collectively so that every rank throws.
  std::string local_error;
  if (groups.size() > static_cast<std::size_t>(INT_MAX / 2)) local_error = "too many groups";
  num_groups_ = static_cast<int>(std::min<std::size_t>(groups.size(), INT_MAX / 2));
  if (num_groups_ == 0 && local_error.empty()) local_error = "no groups given";
  for (int g = 0; g < num_groups_ && local_error.empty(); ++g) {
    const GroupBuffers& b = groups[static_cast<std::size_t>(g)];
    const unsigned long long total = static_cast<unsigned long long>(b.k) * ranks_;
    if (b.k > static_cast<std::size_t>(INT_MAX) ||
        total > static_cast<unsigned long long>(INT_MAX)) {
      local_error = "group " + std::to_string(g) + ": k = " + std::to_string(b.k) + " pairs x " +
                    std::to_string(ranks_) + " ranks = " + std::to_string(total) +
                    " pairs overflows MPI's int count (MPI " + std::to_string(MPI_VERSION) + "." +
                    std::to_string(MPI_SUBVERSION) + " has no large-count collectives used here)";
    } else if (b.k > 0 && (b.send == nullptr || b.recv == nullptr)) {
      local_error = "group " + std::to_string(g) + ": null send or receive buffer";
    }
  }
  bool staging_needs_copy = false;
  if (options_.gpu_aware == GpuAwareMpi::automatic) {
    gpu_aware_ = mpi_reports_gpu_support();
  } else {
    gpu_aware_ = options_.gpu_aware == GpuAwareMpi::yes;
  }
  staging_ = options_.buffer_space == MemorySpace::device && !gpu_aware_;
  if (staging_ && (!options_.copy_to_host || !options_.copy_to_device)) {
    staging_needs_copy = true;
    if (local_error.empty()) {
      local_error =
          "options.buffer_space is device and MPI is not GPU-aware, but options.copy_to_host / "
          "options.copy_to_device are not set (needed to stage through host mirrors)";
    }
  }
  (void)staging_needs_copy;
  if (options_.queue_capacity != 0 &&
      (options_.queue_capacity < 2 || (options_.queue_capacity & (options_.queue_capacity - 1)))) {
    if (local_error.empty()) {
      local_error = "options.queue_capacity = " + std::to_string(options_.queue_capacity) +
                    " is not a power of two >= 2";
    }
  }

  // Agreement: error flag, number of groups, mode flag, then every group's k.
  int mine[3] = {local_error.empty() ? 0 : 1, num_groups_, options_.variable_counts ? 1 : 0};
  int mx[3], mn[3];
  MPI_Allreduce(mine, mx, 3, MPI_INT, MPI_MAX, comm_);
  MPI_Allreduce(mine, mn, 3, MPI_INT, MPI_MIN, comm_);
  std::string error;
  if (!local_error.empty()) {
    error = local_error;
  } else if (mx[0] != 0) {
    error = "another rank rejected its engine set-up (see that rank's error)";
  } else if (mx[1] != mn[1]) {
    error = "ranks disagree on the number of groups (" + std::to_string(mn[1]) + " to " +
            std::to_string(mx[1]) + "; this rank has " + std::to_string(num_groups_) + ")";
  } else if (mx[2] != mn[2]) {
    error = "ranks disagree on options.variable_counts";
  } else {
    std::vector<long long> ks(static_cast<std::size_t>(num_groups_)), kmax(ks.size()),
        kmin(ks.size());
    for (int g = 0; g < num_groups_; ++g) {
      ks[static_cast<std::size_t>(g)] =
          static_cast<long long>(groups[static_cast<std::size_t>(g)].k);
    }
    MPI_Allreduce(ks.data(), kmax.data(), num_groups_, MPI_LONG_LONG, MPI_MAX, comm_);
    MPI_Allreduce(ks.data(), kmin.data(), num_groups_, MPI_LONG_LONG, MPI_MIN, comm_);
    for (int g = 0; g < num_groups_; ++g) {
      const auto i = static_cast<std::size_t>(g);
      if (kmax[i] != kmin[i]) {
        error = "ranks disagree on k of group " + std::to_string(g) + " (" +
                std::to_string(kmin[i]) + " to " + std::to_string(kmax[i]) + "; rank " +
                std::to_string(rank_) + " has " + std::to_string(ks[i]) + ")";
        break;
      }
    }
  }
  if (!error.empty()) {
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&count_comm_);
    MPI_Comm_free(&watch_comm_);
    throw Error(std::string(who) + " (rank " + std::to_string(rank_) + "): " + error);
  }

  // The pair datatype: uint32 index + float value, resized to sizeof(SparsePair).
  {
    int lengths[2] = {1, 1};
    MPI_Aint offsets[2] = {static_cast<MPI_Aint>(offsetof(SparsePair, index)),
                           static_cast<MPI_Aint>(offsetof(SparsePair, value))};
    MPI_Datatype types[2] = {MPI_UINT32_T, MPI_FLOAT};
    MPI_Datatype raw = MPI_DATATYPE_NULL;
    MPI_Type_create_struct(2, lengths, offsets, types, &raw);
    MPI_Type_create_resized(raw, 0, static_cast<MPI_Aint>(sizeof(SparsePair)), &pair_type_);
    MPI_Type_free(&raw);
    MPI_Type_commit(&pair_type_);
  }

  // Groups: counts and displacements once (fixed mode), mirrors when staging.
  groups_.reset(new GroupState[static_cast<std::size_t>(num_groups_)]);
  const auto P = static_cast<std::size_t>(ranks_);
  for (int g = 0; g < num_groups_; ++g) {
    GroupState& s = groups_[static_cast<std::size_t>(g)];
    s.buf = groups[static_cast<std::size_t>(g)];
    const int k = static_cast<int>(s.buf.k);
    s.counts.assign(P, k);
    s.displs.resize(P);
    for (std::size_t r = 0; r < P; ++r) s.displs[r] = static_cast<int>(r) * k;
    s.send_count = k;
    s.total = k * ranks_;
    if (staging_) {
      s.host_send.resize(s.buf.k);
      s.host_recv.resize(s.buf.k * P);
      s.mpi_send = s.host_send.data();
      s.mpi_recv = s.host_recv.data();
    } else {
      s.mpi_send = s.buf.send;
      s.mpi_recv = s.buf.recv;
    }
  }
  requests_.assign(static_cast<std::size_t>(num_groups_), MPI_REQUEST_NULL);
  testsome_indices_.assign(static_cast<std::size_t>(num_groups_), 0);
  testsome_statuses_.resize(static_cast<std::size_t>(num_groups_));
  reply_buf_.resize(P);
  reply_req_.assign(P, MPI_REQUEST_NULL);
  diag_send_req_.assign(P, MPI_REQUEST_NULL);
  diag_recv_req_.assign(P, MPI_REQUEST_NULL);
  diag_recv_buf_.resize(P);
  diag_got_.assign(P, 0);
  MPI_Irecv(&query_buf_, 1, MPI_UNSIGNED_LONG_LONG, MPI_ANY_SOURCE, tag_query, watch_comm_,
            &query_req_);
  ready_.assign(static_cast<std::size_t>(num_groups_), 0);
  pending_.reserve(static_cast<std::size_t>(num_groups_));
  // At most one outstanding item per group, so a capacity >= G never reports full.
  const std::size_t cap = options_.queue_capacity != 0
                              ? options_.queue_capacity
                              : next_pow2(std::max<std::size_t>(2 * num_groups_, 2));
  submit_q_ = std::make_unique<BoundedQueue<int>>(cap);
  done_q_ =
      std::make_unique<BoundedQueue<int>>(next_pow2(std::max<std::size_t>(2 * num_groups_, 2)));

  if (mode_ == ProgressMode::thread) {
    int pu = -1;
    try {
      pinner_ = std::make_unique<Pinner>();
      pu = pinner_->choose(options_.pin, options_.preferred_pus, pin_what, pin_note_);
    } catch (...) {
      MPI_Cancel(&query_req_);
      MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
      MPI_Type_free(&pair_type_);
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&count_comm_);
      MPI_Comm_free(&watch_comm_);
      throw;
    }
    // Start the thread and wait until it reports its binding, so stats are complete.
    // The thread writes pinned_pu_ / pin_note_ before set_value; get() acquires them.
    std::promise<void> bound;
    std::future<void> bound_future = bound.get_future();
    thread_ = std::thread([this, pu, bound = std::move(bound)]() mutable {
      if (pu >= 0 && pinner_->bind_current_thread(pu, pin_note_)) pinned_pu_ = pu;
      bound.set_value();  // the promise lives in this lambda, not the constructor
      thread_main();
    });
    bound_future.get();
  } else {
    pin_note_ =
        std::string("unpinned: inline mode (") +
        (options_.force_inline ? "options.force_inline" : thread_level_name(thread_level_)) +
        "), no progress thread";
  }
}

EngineImpl::~EngineImpl() {
  shutdown();
}

void EngineImpl::shutdown() noexcept {
  if (stopped_.exchange(true)) return;
  if (mode_ == ProgressMode::thread) {
    // Release: the thread's acquire load of stop_ sees every submission made before.
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  } else if (!mpi_finalized()) {
    // Inline: drain what was submitted, bounded like the thread.
    const auto deadline = Clock::now() + std::chrono::duration<double>(options_.shutdown_timeout_s);
    for (;;) {
      const bool did = step();
      if (!did && inflight_ == 0 && submit_q_->empty_approx()) break;
      if (Clock::now() > deadline) break;
      if (!did) std::this_thread::yield();
    }
  }
  if (mpi_finalized()) {
    std::fprintf(stderr,
                 "omgs: warning: ProgressEngine destroyed after MPI_Finalize; its communicator "
                 "and datatype are not freed\n");
    return;
  }
  if (inflight_ > 0) {
    // Collectives cannot be cancelled (MPI_Cancel is for point-to-point only). The MPI
    // library may still write into the receive buffers and read counts/displacements:
    // keep the group state alive on purpose rather than free memory MPI still uses.
    std::fprintf(stderr,
                 "omgs: warning: ProgressEngine shut down with %d collectives still in flight "
                 "after %.1f s (did every rank submit the same groups?); their state is leaked\n",
                 inflight_, options_.shutdown_timeout_s);
    leaked_ = true;
    (void)groups_.release();
    auto* keep = new std::vector<MPI_Request>(std::move(requests_));
    (void)keep;
  }
  // The watchdog's receive is cancelled; replies still in flight are given a moment (they
  // are a few bytes, sent eagerly) and otherwise left to MPI.
  if (query_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_req_);
    MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
  }
  for (auto* reqs : {&reply_req_, &diag_send_req_, &diag_recv_req_}) {
    for (MPI_Request& r : *reqs) {
      if (r == MPI_REQUEST_NULL) continue;
      if (reqs == &diag_recv_req_) MPI_Cancel(&r);
      int flag = 0;
      const auto until = Clock::now() + std::chrono::milliseconds(100);
      while (!flag && Clock::now() < until) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      if (!flag) MPI_Request_free(&r);
    }
  }
  MPI_Type_free(&pair_type_);
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&count_comm_);  // legal with pending operations: they complete normally
  MPI_Comm_free(&watch_comm_);
}

void EngineImpl::thread_main() {
  const IdleOptions idle = options_.idle;
  const auto sleep = std::chrono::duration<double>(idle.sleep_s);
  long idle_iterations = 0;
  bool stopping = false;
  Clock::time_point deadline{};
  for (;;) {
    if (!stopping && stop_.load(std::memory_order_acquire)) {
      stopping = true;
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options_.shutdown_timeout_s));
    }
    const bool did = step();
    if (stopping) {
      // Drain: everything submitted before the stop is posted (in plan order) and waited
      // for; a group held back because an earlier one was never submitted is dropped on
      // every rank alike.
      if (!did && inflight_ == 0 && submit_q_->empty_approx()) break;
      if (Clock::now() > deadline) break;
    }
    if (did) {
      idle_iterations = 0;
      continue;
    }
    ++idle_iterations;
    if (idle_iterations <= idle.spin_iterations) {
      OMGS_CPU_RELAX();
    } else if (idle_iterations <= static_cast<long>(idle.spin_iterations) + idle.yield_iterations) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
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
  if (broken_) {
    for (int h = 0; h < num_groups_; ++h) {
      GroupState& s = groups_[static_cast<std::size_t>(h)];
      if (ready_[static_cast<std::size_t>(h)] == 0) continue;
      ready_[static_cast<std::size_t>(h)] = 0;
      s.failed = true;
      ++inflight_;  // on_request_done accounts for it as a completion
      on_request_done(h);
      did = true;
    }
  }
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
  if (inflight_ > 0) {
    int outcount = 0;
    const int rc = MPI_Testsome(num_groups_, requests_.data(), &outcount, testsome_indices_.data(),
                                testsome_statuses_.data());
    if (rc != MPI_SUCCESS) mpi_errors_.fetch_add(1, std::memory_order_relaxed);
    // MPI_ERR_IN_STATUS: the completed requests carry their own error; any other error
    // leaves outcount meaningless and the requests untouched (tested again next pass).
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && outcount != MPI_UNDEFINED) {
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
      if (outcount > 0) did = true;
    }
  }
  if (service_watchdog()) did = true;
  return did;
}

void EngineImpl::note_mpi_error(int code) noexcept {
  int cls = 0;
  MPI_Error_class(code, &cls);
  last_error_class_.store(cls, std::memory_order_relaxed);
  mpi_errors_.fetch_add(1, std::memory_order_relaxed);
}

void EngineImpl::post_failed(int g, int rc) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  note_mpi_error(rc);
  post_errors_.fetch_add(1, std::memory_order_relaxed);
  s.post_errors.fetch_add(1, std::memory_order_relaxed);
  requests_[static_cast<std::size_t>(g)] = MPI_REQUEST_NULL;
  retry_after_ = Clock::now() + std::chrono::milliseconds(1);
}

bool EngineImpl::post_pending_data() noexcept {
  bool did = false;
  while (groups_[static_cast<std::size_t>(next_data_)].counts_ready) {
    if (!post_data(next_data_)) break;
    groups_[static_cast<std::size_t>(next_data_)].counts_ready = false;
    next_data_ = next_data_ + 1 == num_groups_ ? 0 : next_data_ + 1;
    did = true;
  }
  return did;
}

bool EngineImpl::post_first(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  s.failed = false;
  if (options_.variable_counts) {
    const int rc = MPI_Iallgather(&s.send_count, 1, MPI_INT, s.counts.data(), 1, MPI_INT,
                                  count_comm_, &requests_[static_cast<std::size_t>(g)]);
    if (rc != MPI_SUCCESS) {
      post_failed(g, rc);
      return false;
    }
    s.counts_phase = true;
    collectives_posted_.fetch_add(1, std::memory_order_relaxed);
  } else if (!post_data(g)) {
    return false;
  }
  ++inflight_;
  s.posts.fetch_add(1, std::memory_order_relaxed);
  s.last_post_s.store(now_s(), std::memory_order_relaxed);
  s.post_seq.store(posted_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return true;
}

bool EngineImpl::post_data(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (options_.variable_counts) {
    // Counts arrived from every rank; each is <= k (enforced by submit on every rank),
    // so the prefix sums stay <= P*k, checked against INT_MAX at set-up.
    const int k = static_cast<int>(s.buf.k);
    int offset = 0;
    for (int r = 0; r < ranks_; ++r) {
      int& c = s.counts[static_cast<std::size_t>(r)];
      if (c < 0 || c > k) {  // a peer's bug; never write past the buffer
        mpi_errors_.fetch_add(1, std::memory_order_relaxed);
        c = std::max(0, std::min(c, k));
      }
      s.displs[static_cast<std::size_t>(r)] = offset;
      offset += c;
    }
    s.total = offset;
  }
  const int rc =
      MPI_Iallgatherv(s.mpi_send, s.send_count, pair_type_, s.mpi_recv, s.counts.data(),
                      s.displs.data(), pair_type_, comm_, &requests_[static_cast<std::size_t>(g)]);
  if (rc != MPI_SUCCESS) {
    post_failed(g, rc);
    return false;
  }
  s.counts_phase = false;
  collectives_posted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void EngineImpl::on_request_done(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (s.counts_phase && !s.failed) {
    // Chained: counts known. Post pairs in plan order only (see count_comm_).
    s.counts_phase = false;
    s.counts_ready = true;
    post_pending_data();
    return;
  }
  s.counts_phase = false;
  --inflight_;
  completed_.fetch_add(1, std::memory_order_relaxed);
  s.completions.fetch_add(1, std::memory_order_relaxed);
  s.last_complete_s.store(now_s(), std::memory_order_relaxed);
  s.bytes_sent.fetch_add(static_cast<std::uint64_t>(s.send_count) * sizeof(SparsePair),
                         std::memory_order_relaxed);
  s.bytes_received.fetch_add(static_cast<std::uint64_t>(s.total) * sizeof(SparsePair),
                             std::memory_order_relaxed);
  groups_completed_.fetch_add(1, std::memory_order_relaxed);
  // The queue's release/acquire hands counts/displs/total and the received data to the
  // owner. It cannot be full: at most one item per group is outstanding and cap >= 2G.
  while (!done_q_->try_push(g)) std::this_thread::yield();
}

SubmitStatus EngineImpl::submit(int g, std::size_t count) noexcept {
  if (g < 0 || g >= num_groups_) return SubmitStatus::bad_group;
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (count > s.buf.k || (!options_.variable_counts && count != s.buf.k)) {
    return SubmitStatus::bad_group;
  }
  if (stop_.load(std::memory_order_relaxed) || stopped_.load(std::memory_order_relaxed)) {
    return SubmitStatus::stopped;
  }
  int expected = 0;
  // Acquire: pairs with the owner's release when it reported the previous completion,
  // so the driver is done with the buffers before we overwrite send_count / the mirror.
  if (!s.state.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    return SubmitStatus::busy;
  }
  s.send_count = static_cast<int>(count);
  submitted_.fetch_add(1, std::memory_order_relaxed);
  if (staging_ && count > 0)
    options_.copy_to_host(s.host_send.data(), s.buf.send, count * sizeof(SparsePair));
  s.last_submit_s.store(now_s(), std::memory_order_relaxed);
  if (!submit_q_->try_push(g)) {
    s.state.store(0, std::memory_order_release);
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
  if (staging_ && s.total > 0) {
    options_.copy_to_device(s.buf.recv, s.host_recv.data(),
                            static_cast<std::size_t>(s.total) * sizeof(SparsePair));
  }
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
  groups_[static_cast<std::size_t>(g)].state.store(0, std::memory_order_release);
  return true;
}

WaitStatus EngineImpl::wait(int g, double timeout_s) noexcept {
  if (g < 0 || g >= num_groups_) return WaitStatus::not_submitted;
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (s.state.load(std::memory_order_acquire) == 0) return WaitStatus::not_submitted;
  auto it = std::find(pending_.begin(), pending_.end(), g);
  if (it != pending_.end()) {
    pending_.erase(it);
    s.state.store(0, std::memory_order_release);
    return s.failed ? WaitStatus::failed : WaitStatus::ok;
  }
  if (timeout_s < 0) timeout_s = options_.wait_timeout_s;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  long idle = 0;
  for (;;) {
    bool did = mode_ == ProgressMode::inline_ ? step() : false;
    int done = 0;
    while (done_q_->try_pop(done)) {
      did = true;
      finish_group_owner(done);
      if (done == g) {
        s.state.store(0, std::memory_order_release);
        return s.failed ? WaitStatus::failed : WaitStatus::ok;
      }
      pending_.push_back(done);  // capacity reserved: never allocates
    }
    if (did) {
      idle = 0;
    } else if (++idle > 1000) {
      if (Clock::now() > deadline) return WaitStatus::timeout;
      std::this_thread::yield();
    } else {
      OMGS_CPU_RELAX();
    }
  }
}

WaitStatus EngineImpl::wait_all(double timeout_s) noexcept {
  WaitStatus result = WaitStatus::ok;
  if (timeout_s < 0) timeout_s = options_.wait_timeout_s;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  for (int g = 0; g < num_groups_; ++g) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    const WaitStatus st = wait(g, std::max(0.0, left));
    if (st == WaitStatus::timeout) return st;
    if (st == WaitStatus::failed) result = st;
  }
  return result;
}

// ---------------------------------------------------------------------------------------
// The watchdog. Every engine keeps one receive posted for queries on watch_comm_; the
// driver (progress thread, or the owner in inline mode) answers each with this rank's
// counters. diagnose() asks every other rank and waits a bounded time for the answers.
// ---------------------------------------------------------------------------------------

bool EngineImpl::service_watchdog() noexcept {
  bool did = false;
  if (query_req_ != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&query_req_, &flag, &st) == MPI_SUCCESS && flag) {
      answer_query(st.MPI_SOURCE);
      MPI_Irecv(&query_buf_, 1, MPI_UNSIGNED_LONG_LONG, MPI_ANY_SOURCE, tag_query, watch_comm_,
                &query_req_);
      did = true;
    }
  }
  // Acquire: diag_group_ / diag_timeout_s_ written by the owner before it asked.
  const int state = diag_state_.load(std::memory_order_acquire);
  if (state == 1) {
    start_diagnosis();
    did = true;
  } else if (state == 2) {
    did = drive_diagnosis() || did;
  }
  return did;
}

void EngineImpl::answer_query(int source) noexcept {
  if (source < 0 || source >= ranks_) return;
  const auto r = static_cast<std::size_t>(source);
  MPI_Request& req = reply_req_[r];
  if (req != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (!flag) return;  // the previous answer to that rank is still on its way
  }
  WatchReply& m = reply_buf_[r];
  m.round = query_buf_;
  m.posted = posted_.load(std::memory_order_relaxed);
  m.completed = completed_.load(std::memory_order_relaxed);
  m.submitted = submitted_.load(std::memory_order_relaxed);
  m.post_errors = post_errors_.load(std::memory_order_relaxed);
  m.last_error_class =
      static_cast<unsigned long long>(last_error_class_.load(std::memory_order_relaxed));
  if (MPI_Isend(&m, watch_reply_count, MPI_UNSIGNED_LONG_LONG, source, tag_reply, watch_comm_,
                &req) != MPI_SUCCESS) {
    req = MPI_REQUEST_NULL;
    return;
  }
  queries_answered_.fetch_add(1, std::memory_order_relaxed);
}

void EngineImpl::start_diagnosis() noexcept {
  const int g = diag_group_;
  const GroupState& s = groups_[static_cast<std::size_t>(g)];
  // The exchange waited for: the one posted for g, or (not posted here yet) the number it
  // will get in plan order.
  const auto G = static_cast<std::uint64_t>(num_groups_);
  if (requests_[static_cast<std::size_t>(g)] != MPI_REQUEST_NULL || s.counts_ready) {
    diag_needed_ = s.post_seq.load(std::memory_order_relaxed);
  } else {
    const std::uint64_t cycle = g >= next_post_ ? cycle_ : cycle_ + 1;
    diag_needed_ = cycle * G + static_cast<std::uint64_t>(g) + 1;
  }
  ++diag_round_;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    diag_got_[i] = 0;
    if (r == rank_) continue;
    // Answers to an earlier round that timed out may still arrive: matched by round below.
    if (diag_recv_req_[i] == MPI_REQUEST_NULL)
      MPI_Irecv(&diag_recv_buf_[i], watch_reply_count, MPI_UNSIGNED_LONG_LONG, r, tag_reply,
                watch_comm_, &diag_recv_req_[i]);
    if (diag_send_req_[i] != MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Test(&diag_send_req_[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) continue;  // the last query to r never left: r is not answering anyway
    }
    MPI_Isend(&diag_round_, 1, MPI_UNSIGNED_LONG_LONG, r, tag_query, watch_comm_,
              &diag_send_req_[i]);
  }
  diag_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(diag_timeout_s_));
  diag_state_.store(2, std::memory_order_relaxed);
  drive_diagnosis();
}

bool EngineImpl::drive_diagnosis() noexcept {
  bool did = false;
  bool all = true;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == rank_ || diag_got_[i]) continue;
    int flag = 0;
    if (diag_recv_req_[i] != MPI_REQUEST_NULL)
      MPI_Test(&diag_recv_req_[i], &flag, MPI_STATUS_IGNORE);
    if (flag) {
      did = true;
      if (diag_recv_buf_[i].round == diag_round_) {
        diag_got_[i] = 1;
        continue;
      }
      // A late answer to an earlier round: listen again.
      MPI_Irecv(&diag_recv_buf_[i], watch_reply_count, MPI_UNSIGNED_LONG_LONG, r, tag_reply,
                watch_comm_, &diag_recv_req_[i]);
    }
    all = false;
  }
  if (all || Clock::now() > diag_deadline_) {
    // Release: the owner acquires the answers (diag_got_, diag_recv_buf_, diag_needed_).
    diag_state_.store(3, std::memory_order_release);
    did = true;
  }
  return did;
}

Diagnosis EngineImpl::diagnose(int g, double timeout_s) {
  Diagnosis d;
  d.group = g;
  if (g < 0 || g >= num_groups_) {
    d.report = "omgs: watchdog: group " + std::to_string(g) + " does not exist";
    return d;
  }
  if (!(timeout_s > 0)) timeout_s = 1.0;
  if (diag_state_.load(std::memory_order_acquire) != 0) {
    d.report = "omgs: watchdog: a diagnosis is already running";
    return d;
  }
  diag_group_ = g;
  diag_timeout_s_ = timeout_s;
  diag_state_.store(1, std::memory_order_release);
  // The driver runs it; in inline mode that is us.
  const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(timeout_s + 5.0));
  while (diag_state_.load(std::memory_order_acquire) != 3) {
    if (mode_ == ProgressMode::inline_) {
      step();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (Clock::now() > give_up) {
      d.report = "omgs: watchdog: this rank's progress thread did not run the diagnosis";
      return d;  // leaves diag_state_ set: the thread is stuck, no second diagnosis
    }
  }
  d.needed = diag_needed_;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    PeerProgress p;
    p.rank = r;
    if (r == rank_) {
      p.responded = true;
      p.posted = posted_.load(std::memory_order_relaxed);
      p.completed = completed_.load(std::memory_order_relaxed);
      p.submitted = submitted_.load(std::memory_order_relaxed);
      p.post_errors = post_errors_.load(std::memory_order_relaxed);
      p.last_error_class = last_error_class_.load(std::memory_order_relaxed);
    } else if (diag_got_[i]) {
      const WatchReply& m = diag_recv_buf_[i];
      p.responded = true;
      p.posted = m.posted;
      p.completed = m.completed;
      p.submitted = m.submitted;
      p.post_errors = m.post_errors;
      p.last_error_class = static_cast<int>(m.last_error_class);
    }
    if (!p.responded || p.posted < d.needed) d.lagging.push_back(r);
    d.peers.push_back(p);
  }
  diag_state_.store(0, std::memory_order_release);

  const auto G = static_cast<std::uint64_t>(num_groups_);
  auto where = [G](std::uint64_t seq) {
    if (seq == 0) return std::string("nothing posted yet");
    return "posted up to group " + std::to_string((seq - 1) % G) + " of round " +
           std::to_string((seq - 1) / G);
  };
  std::string r = "omgs: watchdog (rank " + std::to_string(rank_) + "): group " +
                  std::to_string(g) + " of round " + std::to_string((d.needed - 1) / G) +
                  " has not completed. ";
  if (d.lagging.empty()) {
    r += "Every rank has posted it; MPI has not completed it (network or MPI library stall).";
  } else {
    r += "Ranks that have not posted it: ";
    for (std::size_t j = 0; j < d.lagging.size(); ++j) {
      const PeerProgress& p = d.peers[static_cast<std::size_t>(d.lagging[j])];
      if (j > 0) r += "; ";
      r += std::to_string(p.rank) + " (";
      if (!p.responded) {
        r += "no answer: stuck outside omgs, or dead)";
        continue;
      }
      r += where(p.posted);
      if (p.post_errors > 0) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        if (MPI_Error_string(p.last_error_class, msg, &len) != MPI_SUCCESS) len = 0;
        r += ", " + std::to_string(p.post_errors) +
             " MPI error(s) posting, last: " + std::string(msg, static_cast<std::size_t>(len));
      }
      r += ")";
    }
    r += ".";
  }
  d.report = std::move(r);
  return d;
}

GroupTimes EngineImpl::group_times(int g) const noexcept {
  GroupTimes t;
  if (g < 0 || g >= num_groups_) return t;
  const GroupState& s = groups_[static_cast<std::size_t>(g)];
  const double base = std::chrono::duration<double>(epoch_.time_since_epoch()).count();
  t.submit_s = base + s.last_submit_s.load(std::memory_order_relaxed);
  t.post_s = base + s.last_post_s.load(std::memory_order_relaxed);
  t.complete_s = base + s.last_complete_s.load(std::memory_order_relaxed);
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
  out.collectives_posted = collectives_posted_.load(std::memory_order_relaxed);
  out.groups_completed = groups_completed_.load(std::memory_order_relaxed);
  out.mpi_errors = mpi_errors_.load(std::memory_order_relaxed);
  out.queries_answered = queries_answered_.load(std::memory_order_relaxed);
  out.groups.resize(static_cast<std::size_t>(num_groups_));
  for (int g = 0; g < num_groups_; ++g) {
    const GroupState& s = groups_[static_cast<std::size_t>(g)];
    GroupStats& o = out.groups[static_cast<std::size_t>(g)];
    o.posts = s.posts.load(std::memory_order_relaxed);
    o.completions = s.completions.load(std::memory_order_relaxed);
    o.last_submit_s = s.last_submit_s.load(std::memory_order_relaxed);
    o.last_post_s = s.last_post_s.load(std::memory_order_relaxed);
    o.last_complete_s = s.last_complete_s.load(std::memory_order_relaxed);
    o.bytes_sent = s.bytes_sent.load(std::memory_order_relaxed);
    o.bytes_received = s.bytes_received.load(std::memory_order_relaxed);
    o.post_errors = s.post_errors.load(std::memory_order_relaxed);
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

SubmitStatus ProgressEngine::submit(int g) noexcept {
  if (g < 0 || g >= impl_->num_groups_) return SubmitStatus::bad_group;
  return impl_->submit(g, impl_->groups_[static_cast<std::size_t>(g)].buf.k);
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

const int* ProgressEngine::recv_counts(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return nullptr;
  return impl_->groups_[static_cast<std::size_t>(g)].counts.data();
}
const int* ProgressEngine::recv_displs(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return nullptr;
  return impl_->groups_[static_cast<std::size_t>(g)].displs.data();
}
std::size_t ProgressEngine::recv_total(int g) const noexcept {
  if (g < 0 || g >= impl_->num_groups_) return 0;
  return static_cast<std::size_t>(impl_->groups_[static_cast<std::size_t>(g)].total);
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
