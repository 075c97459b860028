// omgs::ProgressEngine: one progress thread (hwloc-pinned) that posts one collective per
// merged group, in plan order, and reports completions: MPI_Iallgatherv of the group's
// pairs, MPI_Iallreduce of a dense group's floats, or the sparse allreduce of its pairs
// (GroupBuffers::kind says which).
//
//   owner thread                         progress thread
//   submit(g) --> submit queue  ------>  post group g's collective      (plan order)
//                                        MPI_Testsome(in-flight groups)
//   poll_completed(g) / wait(g) <------  completion queue <-- "g done"
//
// The engine works on buffers owned by the caller (GroupBuffers). The comm module (the
// engine and src/comm/collectives.cpp) is the only omgs code that calls MPI; the engine uses
// its own duplicates of the communicator it is given.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/error.hpp>
#include <omgs/export.hpp>

namespace omgs {

/// One selected gradient entry as it travels on the wire: 8 bytes, one MPI datatype.
struct SparsePair {
  std::uint32_t index;
  float value;
};
static_assert(sizeof(SparsePair) == 8, "SparsePair must be 8 bytes");

/// Where the progress thread runs.
enum class PinPolicy {
  automatic,  ///< a core of the process's cpuset not used by the creating thread (last first)
  none,       ///< do not pin
  pu,         ///< the PU with OS index PinOption::pu
};

struct PinOption {
  PinPolicy policy = PinPolicy::automatic;
  int pu = -1;  ///< OS index of the PU, for PinPolicy::pu
};

/// Parses "auto" | "none" | "<int>" (the syntax of OMGS_PROGRESS_CPU). Throws omgs::Error
/// naming `what` (e.g. "OMGS_PROGRESS_CPU") on anything else.
OMGS_EXPORT PinOption parse_pin_option(std::string_view text,
                                       std::string_view what = "OMGS_PROGRESS_CPU");

/// Whether MPI may be handed device pointers.
enum class GpuAwareMpi { automatic, yes, no };

/// Parses "auto" | "1" | "0" (also "yes"/"no", "on"/"off", "true"/"false"), the syntax
/// of OMGS_GPU_AWARE_MPI. Throws omgs::Error naming `what` on anything else.
OMGS_EXPORT GpuAwareMpi parse_gpu_aware_option(std::string_view text,
                                               std::string_view what = "OMGS_GPU_AWARE_MPI");

/// What the MPI library reports at run time (Open MPI: MPIX_Query_cuda_support /
/// MPIX_Query_rocm_support; MPICH >= 4: MPIX_GPU_query_support). False when the library
/// has no such query. MPI must be initialized.
OMGS_EXPORT bool mpi_reports_gpu_support();

enum class MemorySpace { host, device };

enum class ProgressMode {
  thread,   ///< the progress thread makes every MPI call (MPI_THREAD_MULTIPLE/SERIALIZED)
  inline_,  ///< no thread; the owner drives MPI from submit/progress/poll/wait calls
};

OMGS_EXPORT const char* to_string(ProgressMode mode);

/// Back-off of every polling loop (the progress thread idling, wait(), the runtime's
/// submit): after `spin_iterations` empty polls it yields for `yield_iterations` polls,
/// then sleeps, starting at `sleep_s` and doubling up to `max_sleep_s`. Anything that
/// happens (a submission, a completion) resets it to spinning. On a loaded machine the
/// sleeping thread leaves its core to the threads that have work (docs/openmp.md).
struct IdleOptions {
  int spin_iterations = 2000;
  int yield_iterations = 200;
  double sleep_s = 50e-6;
  double max_sleep_s = 500e-6;  ///< bound of the doubling sleep (not below sleep_s)
};

/// How a sparse group's pairs travel (docs/api.md, "Pair wire"): `pairs8` the 8-byte
/// (index, value) pairs; fp32 / bf16 / fp16 the compact pair format (<omgs/pair_format.hpp>,
/// about 5.5-5.9 / 3.4-3.9 bytes per pair), bf16 and fp16 rounding the values with the
/// rounding error kept in the residual.
enum class PairWire : std::uint8_t { pairs8, fp32, bf16, fp16 };
OMGS_EXPORT std::string_view to_string(PairWire wire);
/// "pairs8" | "fp32" | "bf16" | "fp16"; throws omgs::Error naming the value otherwise.
OMGS_EXPORT PairWire parse_pair_wire(std::string_view name);

/// How a dense group's values travel (docs/comm.md, "Dense groups in 16 bits"): fp32 (one
/// MPI allreduce of floats), or bf16 / fp16 (WireKind::allreduce_mean16: each rank's values
/// rounded to 16 bits, summed in fp32 by the owner of each shard, the mean rounded to 16
/// bits once). `automatic` (RuntimeOptions::dense_wire only): the gradient type's.
enum class DenseWire : std::uint8_t { automatic, fp32, bf16, fp16 };
OMGS_EXPORT std::string_view to_string(DenseWire wire);
/// "automatic" | "fp32" | "bf16" | "fp16"; throws omgs::Error naming `what` otherwise.
OMGS_EXPORT DenseWire parse_dense_wire(std::string_view name, std::string_view what = "dense_wire");

/// The collective a group's buffers are for: which wire the engine posts them with
/// (src/comm/wire.cpp's registry), and which fields of GroupBuffers it reads. The fields of
/// another kind must be left at their defaults: a group whose fields contradict its kind is
/// refused at set-up (on every rank). A wire registered beside these (register_wire,
/// src/comm/wire.hpp) takes a value of its own.
enum class WireKind : int {
  allgather_pairs = 0,   ///< send, recv, k: MPI_Iallgatherv of every rank's pairs
  allreduce_sum = 1,     ///< dense_send, dense_recv, dense_numel, blocking_allreduce
  sparse_allreduce = 2,  ///< send, recv, k, sparse_numel, dropped, pair_wire
  /// dense_send, dense_recv, dense_numel: the sum in two levels (reduce-scatter inside the
  /// node, allreduce of the shard across nodes on the rail, allgather inside the node)
  allreduce_node = 3,
  /// dense16_send, dense16_recv, dense_numel, dense_wire (bf16 / fp16), blocking_allreduce:
  /// the mean over the ranks in 16 bits (a reduce-scatter by MPI_Ialltoallv whose partial
  /// sums are fp32, then MPI_Iallgatherv of the rounded means)
  allreduce_mean16 = 4,
  /// dense_send, dense_recv, dense_numel, k, node_residual: the sparse node-summed exchange
  sparse_node = 5,
};
/// The name its wire was registered with (e.g. "allgather_pairs"), or "unregistered".
OMGS_EXPORT const char* to_string(WireKind kind);

/// Caller-owned buffers of one merged group, of the collective `kind` names. An allgather
/// group: each rank contributes up to k pairs from `send`; `recv` receives the pairs of all
/// P ranks, rank r's at recv_displs(g)[r]. The buffers must stay valid (and not be written
/// while the group is in flight) for the engine's lifetime.
struct GroupBuffers {
  const SparsePair* send = nullptr;  ///< k pairs (in options.buffer_space)
  SparsePair* recv = nullptr;        ///< P * k pairs (sparse allreduce: S, below)
  std::size_t k = 0;                 ///< pairs per rank (fixed mode) or the maximum (variable)
  /// A dense group (WireKind::allreduce_sum; k == 0): one MPI_Iallreduce (MPI_SUM) of
  /// dense_numel floats from dense_send into dense_recv, on the same communicator as the
  /// allgathers and in the same plan order. submit(g) with count 0 (variable mode) or
  /// submit(g).
  const float* dense_send = nullptr;  ///< dense_numel floats (in options.buffer_space)
  float* dense_recv = nullptr;        ///< dense_numel floats: the sum over the ranks
  std::size_t dense_numel = 0;
  /// A dense group: the progress thread calls a blocking MPI_Allreduce and the group
  /// completes when it returns (RuntimeOptions::dense_allreduce), instead of posting an
  /// MPI_Iallreduce. Needs the progress thread (not inline mode).
  bool blocking_allreduce = false;
  /// A 16-bit dense group (WireKind::allreduce_mean16; k == 0): dense_numel values of the
  /// 16-bit type dense_wire names (their bits) from dense16_send; dense16_recv receives, on
  /// every rank, each element's mean over the P ranks: the P values widened exactly to
  /// fp32, summed in fp32 on the rank that owns the element's shard (n / P elements each),
  /// divided by P and rounded once to the type (|error| <= 2^-8 (bf16) or 2^-11 (fp16) of
  /// the mean's magnitude, plus (P + 1) 2^-24 of the mean of the |values|; docs/comm.md).
  /// Runs on host buffers (device buffers are staged) on a communicator of its own.
  const std::uint16_t* dense16_send = nullptr;  ///< dense_numel values (options.buffer_space)
  std::uint16_t* dense16_recv = nullptr;        ///< dense_numel values: the means
  DenseWire dense_wire = DenseWire::fp32;       ///< bf16 or fp16 for allreduce_mean16
  /// Optional (nullptr: none), dense_numel floats: after each exchange the entries of this
  /// rank's shard hold P x (the fp32 mean - the 16-bit mean), the rounding error of the mean
  /// this rank computed (the runtime keeps it in its residual, so no mass is lost); the
  /// other entries are never written. Rank r's shard: n / P elements starting at
  /// r (n / P) + min(r, n % P), one more for r < n % P.
  float* dense16_error = nullptr;
  /// A sparse-allreduce group (WireKind::sparse_allreduce): the group's sparse_numel elements,
  /// exchanged by omgs::detail::SparseAllreduce on a communicator of its own (several steps,
  /// driven by the progress thread beside the other groups' collectives). Each rank submits
  /// up to k pairs from `send` (indices below sparse_numel); about k of the pairs' sums
  /// survive, and every rank receives the same survivors, sorted by index, in `recv`
  /// (recv_total(g), at most S = min(sparse_numel, k + P - 1) however many sums tie:
  /// sparse_allreduce::max_survivors); `dropped` receives what this rank's residual takes
  /// back (dropped_total(g) pairs: at most k with PairWire::pairs8, its pairs whose index did
  /// not survive; at most k + S with a compact pair_wire, which adds the rounding errors of
  /// its region's survivors). Host buffers or staging: the exchange runs on the host.
  std::size_t sparse_numel = 0;
  SparsePair* dropped = nullptr;  ///< k (pairs8) or k + S pairs (in options.buffer_space)
  /// How a sparse-allreduce group's pairs travel (every rank must agree).
  PairWire pair_wire = PairWire::pairs8;
  /// WireKind::sparse_node (docs/comm.md, "The sparse node-summed form"): dense_send is this
  /// rank's gradient + residual; local rank i of a node owns shard i of the node's sum and
  /// selects its ceil(k x shard_i / n) (at least 1) largest |values|, ties to the lower index;
  /// dense_recv gets every node's selections summed. Only if that sum is finite does
  /// node_residual (dense_numel floats) get the rest of this rank's shard, 0 elsewhere.
  float* node_residual = nullptr;
  WireKind kind = WireKind::allgather_pairs;
};

/// Copies `bytes` between host and device memory (the runtime passes e.g. a
/// Kokkos::deep_copy on unmanaged views). Called only on the thread that calls submit()
/// (device->host) and the thread that calls poll_completed()/wait() (host->device).
using CopyFunction = std::function<void(void* dst, const void* src, std::size_t bytes)>;

struct ProgressOptions {
  /// Force inline mode even when MPI would allow a progress thread.
  bool force_inline = false;
  /// Counts per rank may differ per iteration: submit(g, count) with count <= k, and a
  /// small MPI_Iallgather of the counts is chained before each MPI_Iallgatherv.
  bool variable_counts = false;
  PinOption pin;
  /// Auto-pinning prefers these PUs (OS indices), e.g. the cores near the GPU the runtime
  /// uses (hwloc_cudart_get_device_cpuset). Empty: the whole process cpuset.
  std::vector<int> preferred_pus;
  IdleOptions idle;
  /// The caller's compute threads per rank (e.g. Kokkos OpenMP's concurrency; 0 = 1).
  /// Automatic pinning leaves the progress thread unpinned, and a warning is printed once,
  /// when the ranks on a node need more threads than their cpuset has cores.
  int compute_threads = 0;
  /// Read OMGS_PROGRESS_CPU and OMGS_GPU_AWARE_MPI (they win over pin / gpu_aware).
  bool read_environment = true;
  /// Submit / completion queue capacity; 0 = the smallest power of two >= 2 * groups.
  std::size_t queue_capacity = 0;
  MemorySpace buffer_space = MemorySpace::host;
  GpuAwareMpi gpu_aware = GpuAwareMpi::automatic;
  CopyFunction copy_to_host;    ///< needed when staging device buffers through host
  CopyFunction copy_to_device;  ///< needed when staging device buffers through host
  /// Default bound of wait() / wait_all(), seconds.
  double wait_timeout_s = 300.0;
  /// How long the destructor lets in-flight collectives finish before giving up, seconds
  /// (the same default as RuntimeOptions::shutdown_timeout_s).
  double shutdown_timeout_s = 5.0;
  /// Ranks per node for the two-level wires (WireKind::allreduce_node): 0 finds the node
  /// with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); G > 0 makes node = rank / G of the
  /// communicator, so that one machine emulates several nodes. Every rank must give the same
  /// value, and G must divide the ranks; else the engine throws omgs::Error on every rank.
  /// OMGS_RANKS_PER_NODE wins (read_environment).
  int ranks_per_node = 0;
};

enum class SubmitStatus {
  ok,
  queue_full,  ///< back-pressure: nothing was queued, try again later
  busy,        ///< the group was submitted and has not been reported complete yet
  bad_group,   ///< g out of range, or count > k
  stopped,     ///< the engine is shutting down
};

enum class WaitStatus {
  ok,
  timeout,        ///< the group did not complete within the bound (it stays in flight)
  not_submitted,  ///< the group is not in flight and has no unreported completion
  failed,         ///< MPI reported an error completing the group (its receive buffer is invalid)
};

OMGS_EXPORT const char* to_string(SubmitStatus status);
OMGS_EXPORT const char* to_string(WaitStatus status);

struct GroupStats {
  std::uint64_t posts = 0;
  std::uint64_t completions = 0;
  double last_submit_s = 0;          ///< seconds since engine creation
  double last_post_s = 0;            ///< when MPI_Iallgatherv (or the count exchange) was posted
  double last_complete_s = 0;        ///< when MPI_Testsome reported it complete
  std::uint64_t bytes_sent = 0;      ///< cumulative, this rank's contribution
  std::uint64_t bytes_received = 0;  ///< cumulative, all ranks' pairs
  std::uint64_t post_errors = 0;     ///< failed attempts to post (each retried)
  /// A sparse-allreduce group's pairs this rank sent (to the regions' owners, and its
  /// region's survivors) and their bytes on the wire, cumulative; 0 for other groups.
  std::uint64_t pairs_sent = 0, pair_bytes_sent = 0;
};

/// When group g's last exchange happened, in seconds of the steady clock
/// (std::chrono::steady_clock::now().time_since_epoch()), so that callers can put them on
/// their own timeline. Valid once g is reported complete.
struct GroupTimes {
  double submit_s = 0;    ///< submit(g) was called
  double post_s = 0;      ///< the first collective of the exchange was posted
  double complete_s = 0;  ///< MPI reported the pairs complete
};

/// One rank's answer to a watchdog query (ProgressEngine::diagnose).
struct PeerProgress {
  int rank = -1;
  bool responded = false;       ///< false: no answer within the bound (stuck outside omgs, or dead)
  std::uint64_t posted = 0;     ///< exchanges this rank has posted since set-up (plan order)
  std::uint64_t completed = 0;  ///< exchanges this rank has seen complete
  std::uint64_t submitted = 0;  ///< submit() calls accepted on this rank
  std::uint64_t post_errors = 0;  ///< MPI errors while posting, so far
  int last_error_class = 0;       ///< MPI error class of the last one (0: none)
};

/// What a watchdog learns about a group that does not complete.
struct Diagnosis {
  int group = -1;
  /// The exchange waited for is the `needed`-th posted by every rank (1-based, plan order:
  /// iteration * groups + g + 1).
  std::uint64_t needed = 0;
  std::vector<PeerProgress> peers;  ///< one per rank, this rank's own included
  std::vector<int> lagging;         ///< ranks that have not posted it, or did not answer
  std::string report;               ///< one paragraph naming the group and those ranks
};

struct ProgressStats {
  ProgressMode mode = ProgressMode::inline_;
  int mpi_thread_level = 0;  ///< MPI_Query_thread
  int pinned_pu = -1;        ///< OS index of the PU the progress thread is bound to; -1: none
  std::string pin_note;      ///< how the PU was chosen, or why it is unpinned
  bool gpu_aware_mpi = false;
  bool staging = false;  ///< device buffers staged through host mirrors
  bool variable_counts = false;
  int ranks = 0;
  /// The node shape the two-level wires use: ranks per node and nodes (ranks_per_node * nodes
  /// == ranks when the nodes are of equal size; else nodes_equal is false).
  int ranks_per_node = 1;
  int nodes = 1;
  bool nodes_equal = true;
  /// Collectives posted: one per group exchange (MPI_Iallgatherv for a sparse group,
  /// MPI_Iallreduce for a dense one, the start of a sparse allreduce), plus the count
  /// MPI_Iallgather before each sparse group's pairs in variable-count mode (dense groups exchange
  /// no counts).
  std::uint64_t collectives_posted = 0;
  std::uint64_t groups_completed = 0;
  std::uint64_t mpi_errors = 0;  ///< MPI calls that returned an error (with MPI_ERRORS_RETURN)
  std::uint64_t queries_answered = 0;  ///< watchdog queries of other ranks answered
  /// Sets of groups the engine has posted: 1 from construction, + 1 per rebind(). The
  /// counters above and the groups' statistics count since the last set was taken.
  std::uint64_t group_sets = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::vector<GroupStats> groups;
};

namespace detail {
class EngineImpl;
}

class OMGS_EXPORT ProgressEngine {
 public:
  /// Collective over `comm` (MPI_Comm_dup). MPI must be initialized and not finalized.
  /// groups[g] describes group g; groups are posted in index order 0, 1, ..., G-1,
  /// then again 0, ... on every rank. Throws omgs::Error on a bad option, a null
  /// buffer, counts that overflow MPI's int, or an unsuitable MPI thread level.
  ProgressEngine(MPI_Comm comm, std::vector<GroupBuffers> groups, ProgressOptions options = {});
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  /// Collective over the engine's communicator: the engine posts `groups` from now on, as
  /// a new engine would (group numbering, statistics and the watchdog's exchange numbers
  /// restart), keeping its communicators, watchdog, pin and progress thread. Owner
  /// thread only, while idle: every submitted group reported complete (wait / poll) and no
  /// other thread submitting. Every rank's verdict is agreed first: a rank that is busy,
  /// groups that differ across ranks, a failed earlier collective or a progress thread
  /// that does not pause within options.shutdown_timeout_s throw omgs::Error on every
  /// rank, and the engine keeps posting its previous groups.
  void rebind(std::vector<GroupBuffers> groups);

  /// Marks group g ready (its send buffer holds k pairs, or `count` in variable mode).
  /// Never blocks, never allocates. Safe from several threads at once.
  SubmitStatus submit(int g) noexcept;
  SubmitStatus submit(int g, std::size_t count) noexcept;

  /// Drives MPI in inline mode (no-op with a progress thread). Returns true if anything
  /// was posted or completed. Owner thread only.
  bool progress() noexcept;

  /// Pops one completed group into g; false if none is complete yet. Owner thread only.
  bool poll_completed(int& g) noexcept;
  /// Waits until group g completes (completions of other groups seen meanwhile are kept
  /// for poll_completed). timeout_s < 0: options.wait_timeout_s. Owner thread only.
  WaitStatus wait(int g, double timeout_s = -1.0) noexcept;
  /// Waits for every submitted group; their completions are consumed.
  WaitStatus wait_all(double timeout_s = -1.0) noexcept;

  /// The watchdog: asks every other rank how far it has posted and completed (their
  /// progress threads answer; in inline mode a rank answers from its owner's next engine
  /// call) and names the ranks that have not posted group g's pending exchange or did not
  /// answer within timeout_s. Not collective: call it on any rank whose wait(g) timed out.
  /// Owner thread only; allocates (it is for the error path).
  Diagnosis diagnose(int g, double timeout_s = 1.0);

  /// True if group g's last reported exchange failed (WaitStatus::failed).
  bool failed(int g) const noexcept;
  /// Timestamps of group g's last completed exchange (steady clock seconds).
  GroupTimes group_times(int g) const noexcept;
  /// Group g's entry of stats(), without the rest (never allocates; zero for an unknown g).
  GroupStats group_stats(int g) const noexcept;

  /// Pairs rank r contributed to group g's last completed exchange and where they start in
  /// groups[g].recv, valid once g is reported complete; 64-bit (P k may pass an int).
  const std::uint64_t* recv_counts(int g) const noexcept;
  const std::uint64_t* recv_displs(int g) const noexcept;
  /// Total pairs in groups[g].recv after the last completed exchange (a sparse-allreduce
  /// group: the survivors; its recv_counts are 0).
  std::size_t recv_total(int g) const noexcept;
  /// Pairs the last completed exchange of group g gave back to this rank (a
  /// sparse-allreduce group: its pairs in groups[g].dropped; 0 for the other wires).
  std::size_t dropped_total(int g) const noexcept;

  int num_groups() const noexcept;
  int ranks() const noexcept;
  int rank() const noexcept;
  ProgressMode mode() const noexcept;
  int pinned_pu() const noexcept;
  ProgressStats stats() const;

 private:
  std::unique_ptr<detail::EngineImpl> impl_;
};

}  // namespace omgs
