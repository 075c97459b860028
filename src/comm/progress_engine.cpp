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
  // Statistics, relaxed atomics: written by [P] / submitter, read by stats().
  std::atomic<std::uint64_t> posts{0}, completions{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<double> last_submit_s{0}, last_post_s{0}, last_complete_s{0};
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
  bool step() noexcept;  // [P] one pass: pop submissions, post in order, test
  void post_first(int g) noexcept;
  void post_data(int g) noexcept;
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
  int next_post_ = 0;                 // plan order: the next group to post
  int next_data_ = 0;                 // variable counts: the next group whose pairs to post
  int inflight_ = 0;
  std::atomic<std::uint64_t> collectives_posted_{0}, groups_completed_{0}, mpi_errors_{0};

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
      MPI_Type_free(&pair_type_);
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&count_comm_);
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
  MPI_Type_free(&pair_type_);
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&count_comm_);  // legal with pending operations: they complete normally
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
  // Plan order: group next_post_ first, whatever order the submissions came in.
  while (ready_[static_cast<std::size_t>(next_post_)] != 0) {
    ready_[static_cast<std::size_t>(next_post_)] = 0;
    post_first(next_post_);
    next_post_ = next_post_ + 1 == num_groups_ ? 0 : next_post_ + 1;
    did = true;
  }
  if (inflight_ > 0) {
    int outcount = 0;
    const int rc = MPI_Testsome(num_groups_, requests_.data(), &outcount, testsome_indices_.data(),
                                MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) mpi_errors_.fetch_add(1, std::memory_order_relaxed);
    if (outcount != MPI_UNDEFINED) {
      for (int i = 0; i < outcount; ++i)
        on_request_done(testsome_indices_[static_cast<std::size_t>(i)]);
      if (outcount > 0) did = true;
    }
  }
  return did;
}

void EngineImpl::post_first(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  ++inflight_;
  s.posts.fetch_add(1, std::memory_order_relaxed);
  s.last_post_s.store(now_s(), std::memory_order_relaxed);
  if (options_.variable_counts) {
    s.counts_phase = true;
    collectives_posted_.fetch_add(1, std::memory_order_relaxed);
    const int rc = MPI_Iallgather(&s.send_count, 1, MPI_INT, s.counts.data(), 1, MPI_INT,
                                  count_comm_, &requests_[static_cast<std::size_t>(g)]);
    if (rc != MPI_SUCCESS) {
      mpi_errors_.fetch_add(1, std::memory_order_relaxed);
      requests_[static_cast<std::size_t>(g)] = MPI_REQUEST_NULL;
      on_request_done(g);
    }
    return;
  }
  post_data(g);
}

void EngineImpl::post_data(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  s.counts_phase = false;
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
  collectives_posted_.fetch_add(1, std::memory_order_relaxed);
  const int rc =
      MPI_Iallgatherv(s.mpi_send, s.send_count, pair_type_, s.mpi_recv, s.counts.data(),
                      s.displs.data(), pair_type_, comm_, &requests_[static_cast<std::size_t>(g)]);
  if (rc != MPI_SUCCESS) {
    mpi_errors_.fetch_add(1, std::memory_order_relaxed);
    requests_[static_cast<std::size_t>(g)] = MPI_REQUEST_NULL;
    on_request_done(g);
  }
}

void EngineImpl::on_request_done(int g) noexcept {
  GroupState& s = groups_[static_cast<std::size_t>(g)];
  if (s.counts_phase) {
    // Chained: counts known. Post pairs in plan order only (see count_comm_).
    s.counts_phase = false;
    s.counts_ready = true;
    while (groups_[static_cast<std::size_t>(next_data_)].counts_ready) {
      groups_[static_cast<std::size_t>(next_data_)].counts_ready = false;
      post_data(next_data_);
      next_data_ = next_data_ + 1 == num_groups_ ? 0 : next_data_ + 1;
    }
    return;
  }
  --inflight_;
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
    return WaitStatus::ok;
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
        return WaitStatus::ok;
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
  if (timeout_s < 0) timeout_s = options_.wait_timeout_s;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  for (int g = 0; g < num_groups_; ++g) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    const WaitStatus st = wait(g, std::max(0.0, left));
    if (st == WaitStatus::timeout) return st;
  }
  return WaitStatus::ok;
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
