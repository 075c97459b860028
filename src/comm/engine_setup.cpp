// The progress engine's set-up and shutdown: checks, agreement across ranks, per-group
// state, the progress thread. Resources are members that free themselves (OwnedComm,
// Watchdog, PairType), so a failed set-up cleans up on every path.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <future>

#include <omgs/detail/sparse_allreduce.hpp>

#include "comm/engine_impl.hpp"
#include "comm/environment.hpp"

namespace omgs::detail {

namespace {

constexpr const char* who = "omgs::ProgressEngine";

std::atomic<bool> g_oversubscribed_warned{false};

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

}  // namespace

PairType::PairType() {
  int lengths[2] = {1, 1};
  MPI_Aint offsets[2] = {static_cast<MPI_Aint>(offsetof(SparsePair, index)),
                         static_cast<MPI_Aint>(offsetof(SparsePair, value))};
  MPI_Datatype types[2] = {MPI_UINT32_T, MPI_FLOAT};
  MPI_Datatype raw = MPI_DATATYPE_NULL;
  MPI_Type_create_struct(2, lengths, offsets, types, &raw);
  MPI_Type_create_resized(raw, 0, static_cast<MPI_Aint>(sizeof(SparsePair)), &type_);
  MPI_Type_free(&raw);
  MPI_Type_commit(&type_);
}

PairType::~PairType() {
  if (type_ != MPI_DATATYPE_NULL && !mpi_finalized()) MPI_Type_free(&type_);
}

EngineImpl::EngineImpl(MPI_Comm user_comm, std::vector<GroupBuffers> groups,
                       ProgressOptions options)
    : options_(configure(user_comm, std::move(options))),
      comm_(user_comm, /*errors_return=*/true),
      count_comm_(user_comm, /*errors_return=*/true),
      node_comms_(comm_.get(), options_.ranks_per_node),
      phased_comm_(user_comm, /*errors_return=*/true),
      watchdog_(user_comm) {
  ranks_ = comm_.size();
  rank_ = comm_.rank();
  // Local validation; the verdict is agreed on collectively so that every rank throws.
  const std::string verdict = validate_groups(groups);  // sets groups_: before the call
  agree_on_groups(verdict, groups_.get(), num_groups_, who, comm_.get());
  wire_ctx_ = {comm_.get(), pair_type_.get(), &node_comms_, phased_comm_.get(), 0};
  init_groups(groups_.get(), num_groups_, staging_);
  init_driver_state();
  // Collective in every mode, so that ranks in different modes still match.
  start_progress(machine_ranks(comm_.get()));
}

/// The layout the automatic pin decides on. A process cpuset that is the whole machine is
/// shared by every rank of the machine (the launcher did not bind ranks apart).
RankLayout EngineImpl::measure_layout(const MachineRanks& machine) {
  RankLayout l;
  l.compute_threads = std::max(1, options_.compute_threads);
  l.cores = pinner_->process_cores();
  if (pinner_->process_unbound()) {
    l.local_rank = machine.index;
    l.sharing_ranks = machine.count;
  }
  if (oversubscribed(l) && l.compute_threads > 1 && l.local_rank == 0 &&
      !g_oversubscribed_warned.exchange(true)) {
    const int fit = std::max(1, l.cores / l.sharing_ranks - 1);
    std::fprintf(stderr,
                 "omgs: warning: oversubscribed: %s; compute threads wait for descheduled ones "
                 "and the progress thread is left unpinned. Set OMP_NUM_THREADS=%d and "
                 "OMP_WAIT_POLICY=passive (docs/openmp.md)\n",
                 describe(l).c_str(), fit);
  }
  return l;
}

/// Before any collective: MPI usable, the environment applied (job scripts set it
/// uniformly, so a bad value fails on every rank that has it), the progress mode chosen.
ProgressOptions EngineImpl::configure(MPI_Comm user_comm, ProgressOptions options) {
  require_mpi_active(who);
  if (user_comm == MPI_COMM_NULL)
    throw Error(std::string(who) + ": the communicator is MPI_COMM_NULL");
  if (options.read_environment) {
    apply_progress_environment(options.pin, options.gpu_aware, pin_what_);
    apply_if_set(options.ranks_per_node, read_ranks_per_node());
  }
  MPI_Query_thread(&thread_level_);
  mode_ = (thread_level_ >= MPI_THREAD_SERIALIZED && !options.force_inline) ? ProgressMode::thread
                                                                            : ProgressMode::inline_;
  if (mode_ == ProgressMode::inline_ && thread_level_ < MPI_THREAD_SERIALIZED) {
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    if (!is_main)
      throw Error(std::string(who) + ": MPI was initialized with " +
                  thread_level_name(thread_level_) +
                  " and the engine is created on a thread that is not MPI's main thread");
  }
  return options;
}

/// This rank's verdict on the groups and options ("" if fine); decides staging.
std::string EngineImpl::validate_groups(const std::vector<GroupBuffers>& groups) {
  gpu_aware_ = options_.gpu_aware == GpuAwareMpi::automatic
                   ? mpi_reports_gpu_support()
                   : options_.gpu_aware == GpuAwareMpi::yes;
  GroupSet set;
  std::string err = make_group_set(groups, set);
  num_groups_ = set.count;
  groups_ = std::move(set.states);
  staging_ = set.staging;
  if (!err.empty()) return err;
  const IdleOptions& idle = options_.idle;
  if (idle.spin_iterations < 0 || idle.yield_iterations < 0 || !(idle.sleep_s >= 0) ||
      !(idle.max_sleep_s >= 0) || !std::isfinite(idle.sleep_s) || !std::isfinite(idle.max_sleep_s))
    return "options.idle: spin_iterations and yield_iterations must be >= 0, sleep_s and "
           "max_sleep_s finite seconds >= 0";
  if (options_.compute_threads < 0)
    return "options.compute_threads = " + std::to_string(options_.compute_threads) + " is negative";
  const std::size_t cap = options_.queue_capacity;
  if (cap != 0 && (cap < 2 || (cap & (cap - 1))))
    return "options.queue_capacity = " + std::to_string(cap) + " is not a power of two >= 2";
  return "";
}

/// The per-group state and wires of `groups` into `out`, and whether they stage; this
/// rank's verdict on them ("" if fine). Used by construction and rebind().
std::string EngineImpl::make_group_set(const std::vector<GroupBuffers>& groups,
                                       GroupSet& out) const {
  if (groups.size() > static_cast<std::size_t>(INT_MAX / 2)) return "too many groups";
  out.count = static_cast<int>(groups.size());
  if (out.count == 0) return "no groups given";
  out.states.reset(new GroupState[groups.size()]);
  bool host_only = false;
  long long tags = 0;
  WireSetup setup;
  setup.ranks = ranks_;
  setup.unequal_nodes = node_comms_.unequal();
  if (mode_ != ProgressMode::thread)
    setup.inline_reason =
        options_.force_inline ? "options.force_inline" : thread_level_name(thread_level_);
  for (int g = 0; g < out.count; ++g) {
    GroupState& s = out.states[static_cast<std::size_t>(g)];
    try {
      s.wire = make_wire(groups[static_cast<std::size_t>(g)]);
    } catch (const Error& e) {
      return "group " + std::to_string(g) + ": " + e.what();
    }
    s.kind = groups[static_cast<std::size_t>(g)].kind;
    s.k = s.wire->k();
    std::string err = s.wire->check(g, setup);
    if (!err.empty()) return err;
    host_only |= s.wire->host_only();
    tags += s.wire->tags();
  }
  // Each phased group's tags on the one phased communicator: refused past its MPI_TAG_UB
  // (the same on every rank) rather than wrapped onto another group's.
  const int tag_ub = tag_upper_bound(phased_comm_.get());
  if (tags > 0 && tags - 1 > static_cast<long long>(tag_ub))
    return std::to_string(tags) + " tags needed by the phased groups (" +
           std::to_string(SparseAllreduce::tags) +
           " per sparse-allreduce group) exceed the communicator's MPI_TAG_UB = " +
           std::to_string(tag_ub) + ": merge groups, or use an MPI with a larger tag bound";
  out.staging = options_.buffer_space == MemorySpace::device && (!gpu_aware_ || host_only);
  if (out.staging && (!options_.copy_to_host || !options_.copy_to_device))
    return "options.buffer_space is device and MPI is not GPU-aware, but options.copy_to_host / "
           "options.copy_to_device are not set (needed to stage through host mirrors)";
  return "";
}

/// Collective: every rank's verdict, then the number of groups, the mode and every k.
void EngineImpl::agree_on_groups(const std::string& local_error, const GroupState* states,
                                 int count, const char* name, MPI_Comm verdict_comm) {
  const std::string prefix = std::string(name) + " (rank " + std::to_string(rank_) + "): ";
  agree_on_error(verdict_comm, local_error.empty() ? "" : prefix + local_error, name);
  std::vector<std::uint64_t> mx, mn;
  max_min(comm_.get(), {static_cast<std::uint64_t>(count), options_.variable_counts}, mx, mn);
  if (mx[0] != mn[0])
    throw Error(prefix + "ranks disagree on the number of groups (" + std::to_string(mn[0]) +
                " to " + std::to_string(mx[0]) + "; this rank has " + std::to_string(count) + ")");
  if (mx[1] != mn[1]) throw Error(prefix + "ranks disagree on options.variable_counts");
  // Every k, every kind, then every wire's extent (a dense group's size): a group sparse on
  // one rank and dense on another would post an allgather against an allreduce; and how
  // every wire splits its posts.
  const auto G = static_cast<std::size_t>(count);
  std::vector<std::uint64_t> ks;
  for (std::size_t g = 0; g < G; ++g) ks.push_back(states[g].k);
  for (std::size_t g = 0; g < G; ++g) ks.push_back(static_cast<std::uint64_t>(states[g].kind));
  for (std::size_t g = 0; g < G; ++g) ks.push_back(states[g].wire->extent());
  for (std::size_t g = 0; g < G; ++g) ks.push_back(states[g].wire->post_limit());
  max_min(comm_.get(), ks, mx, mn);
  for (std::size_t i = 0; i < ks.size(); ++i)
    if (mx[i] != mn[i])
      throw Error(prefix + "ranks disagree on " +
                  (i < G       ? "k"
                   : i < 2 * G ? "the collective (GroupBuffers::kind)"
                   : i < 3 * G ? "the collective (dense or sparse-allreduce size)"
                               : "the elements per post (OMGS_MAX_POST_COUNT)") +
                  " of group " + std::to_string(i % G) + " (" + std::to_string(mn[i]) + " to " +
                  std::to_string(mx[i]) + "; rank " + std::to_string(rank_) + " has " +
                  std::to_string(ks[i]) + ")");
}

/// Counts and displacements once (fixed mode), host mirrors when staging; collective (a
/// phased wire's communicator), after agree_on_groups.
void EngineImpl::init_groups(GroupState* states, int count, bool staging) {
  const auto P = static_cast<std::size_t>(ranks_);
  WireContext ctx = wire_ctx_;  // tag_base: the phased groups' tags one after another
  for (int g = 0; g < count; ++g) {
    GroupState& s = states[static_cast<std::size_t>(g)];
    const std::uint64_t k = s.k;
    s.counts.assign(P, k);
    s.displs.resize(P);
    for (std::size_t r = 0; r < P; ++r) s.displs[r] = r * k;
    s.send_count = k;
    s.total = k * P;
    s.last_submit_s = s.last_post_s = s.last_complete_s = epoch_s_;
    s.wire->init(ctx, staging, ranks_);
    ctx.tag_base += s.wire->tags();
  }
}

/// Everything the driver and the owner use per iteration, allocated once here.
void EngineImpl::init_driver_state() {
  const auto G = static_cast<std::size_t>(num_groups_);
  requests_.assign(G, MPI_REQUEST_NULL);
  testsome_indices_.assign(G, 0);
  testsome_statuses_.resize(G);
  ready_.assign(G, 0);
  pending_.reserve(G);
  // At most one outstanding item per group, so a capacity >= G never reports full.
  const std::size_t cap = options_.queue_capacity != 0 ? options_.queue_capacity
                                                       : next_pow2(std::max<std::size_t>(2 * G, 2));
  submit_q_ = std::make_unique<BoundedQueue<int>>(cap);
  done_q_ = std::make_unique<BoundedQueue<int>>(next_pow2(std::max<std::size_t>(2 * G, 2)));
}

/// Thread mode: choose the PU, start the thread and wait until it reports its binding, so
/// stats are complete. Inline mode: say why there is no thread.
void EngineImpl::start_progress(const MachineRanks& machine) {
  if (mode_ != ProgressMode::thread) {
    pin_note_ =
        std::string("unpinned: inline mode (") +
        (options_.force_inline ? "options.force_inline" : thread_level_name(thread_level_)) +
        "), no progress thread";
    return;
  }
  pinner_ = std::make_unique<Pinner>();
  layout_ = measure_layout(machine);
  const int pu =
      pinner_->choose(options_.pin, options_.preferred_pus, pin_what_, layout_, pin_note_);
  // The thread writes pinned_pu_ / pin_note_ before set_value; get() acquires them.
  std::promise<void> bound;
  std::future<void> bound_future = bound.get_future();
  thread_ = std::thread([this, pu, bound = std::move(bound)]() mutable {
    if (pu >= 0 && pinner_->bind_current_thread(pu, pin_note_)) pinned_pu_ = pu;
    bound.set_value();  // the promise lives in this lambda, not the constructor
    thread_main();
  });
  bound_future.get();
}

EngineImpl::~EngineImpl() {
  shutdown();
}

/// Drains what was submitted (bounded), then leaves the communicators, the datatype and
/// the watchdog to their own destructors, which run after this.
void EngineImpl::shutdown() noexcept {
  if (stopped_.exchange(true)) return;
  if (mode_ == ProgressMode::thread) {
    // Release: the thread's acquire load of stop_ sees every submission made before.
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  } else if (!mpi_finalized()) {
    // Inline: the owner drains what was submitted, as the thread does.
    Backoff backoff(options_.idle);
    drain(backoff);
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
}

}  // namespace omgs::detail
