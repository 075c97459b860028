// Module runtime: the object a training code creates once and calls every iteration.
//
//   omgs::Runtime rt(MPI_COMM_WORLD, layers, options);   // collective: checks, calibrates, plans
//   for (iteration) {
//     rt.begin_backward();                                 // optional: times layer L-1 exactly
//     for (l = L-1 .. 0) {                                 // backward pass
//       write layer l's gradient into rt.gradient(l);     // zero copy
//       rt.ready(l);                                      // its group complete: sparsify, post
//     }
//     omgs::IterationStats s = rt.finish();               // wait, scatter-add, average
//     use rt.aggregated(l) in the optimizer;
//   }
#pragma once

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/allreduce_form.hpp>
#include <omgs/comm.hpp>
#include <omgs/error.hpp>
#include <omgs/export.hpp>
#include <omgs/gradient_type.hpp>
#include <omgs/plan.hpp>

namespace omgs {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using DeviceMemory = ExecSpace::memory_space;
/// A layer's slot in one of the runtime's flat device buffers.
using GradientView = Kokkos::View<float*, DeviceMemory>;
using ConstGradientView = Kokkos::View<const float*, DeviceMemory>;
/// 16-bit gradient views (RuntimeOptions::gradient_type bf16 / fp16; <omgs/gradient_type.hpp>).
using Bf16GradientView = Kokkos::View<bf16_t*, DeviceMemory>;
using ConstBf16GradientView = Kokkos::View<const bf16_t*, DeviceMemory>;
using Fp16GradientView = Kokkos::View<fp16_t*, DeviceMemory>;
using ConstFp16GradientView = Kokkos::View<const fp16_t*, DeviceMemory>;

/// Where the layers' backward times (which the planner needs) come from.
enum class BackwardTimes {
  automatic,  ///< measured if every LayerSpec::backward_s is 0, else given
  given,      ///< the LayerSpec values
  measure,    ///< measured from the spacing of ready() calls during the first iterations
};

/// What finish() does when a group does not complete within wait_timeout_s.
enum class TimeoutAction {
  report,  ///< return Status::comm_failed with the watchdog's report; finish() may be retried
  abort,   ///< print the report on stderr and MPI_Abort the job
};

struct RuntimeOptions {
  double density = 0.001;  ///< fraction of each group's entries that is sent
  /// How layers are merged into groups, and (mgs_mixed, optimal, dense, mixed with a model
  /// that knows the allreduce, e.g. the calibrated one) which groups are dense. The default
  /// mixed chooses among mgs, mgs_mixed, optimal and dense (docs/planner.md, "Defaults").
  Planner planner = default_planner;
  /// "calibrate" (time top-k on this device and allgather on this communicator, at init),
  /// "reference" (the paper's constants), or the path of an alpha-beta JSON file.
  std::string perf_model = "calibrate";
  std::uint64_t threshold_numel = 8192;  ///< for Planner::threshold
  /// How the sparse groups are exchanged (docs/comm.md, "The sparse allreduce"): allgather
  /// (the default: every rank's top-k pairs on every rank), allreduce (the sparse allreduce:
  /// the global top-k of the summed pairs, its volume near O(k) per rank instead of O(P k)),
  /// or automatic (per group, the faster). OMGS_SPARSE_EXCHANGE wins.
  SparseExchange sparse_exchange = default_sparse_exchange;
  /// The collectives the plans may give a group (PlanConfig::collectives): rows of the
  /// planner's table of collectives, built-in or registered (docs/architecture.md, "Adding
  /// a collective"). Empty (the default): those of sparse_exchange and the dense allreduce.
  /// Every rank must allow the same collectives, by name.
  CollectiveSet collectives;
  /// Bytes per rank one group's exchange may allocate (PlanConfig::memory_budget_bytes; 0,
  /// the default: no limit): the choosing planners (mgs_mixed, optimal, dense, mixed; also
  /// when the closed loop replans) give no group a collective whose row needs more
  /// (docs/planner.md, "The table of collectives"). Every rank must give the same.
  /// OMGS_MEMORY_BUDGET wins (a byte count: 4096, 512MiB, 2GiB, 1.5GB).
  std::uint64_t memory_budget_bytes = 0;
  /// Ranks per node for the two-level collectives (Collective::allreduce_node, sparse_node;
  /// ProgressOptions::ranks_per_node): 0, the default, finds the node by shared memory
  /// (MPI_Comm_split_type); G > 0 makes node = rank / G, so that one machine emulates nodes.
  /// Every rank must give the same; G must divide the ranks. OMGS_RANKS_PER_NODE wins.
  int ranks_per_node = 0;
  /// How the dense groups are allreduced (docs/comm.md, "The dense allreduce's form"):
  /// automatic (a short measurement at construction picks the faster of MPI_Iallreduce and
  /// a blocking MPI_Allreduce by the progress thread; the same on every rank), nonblocking,
  /// or blocking (needs the progress thread). Calibration times the form chosen, and
  /// calibration().dense_allreduce names it. OMGS_DENSE_ALLREDUCE wins.
  DenseAllreduce dense_allreduce = DenseAllreduce::automatic;
  PinOption progress_pin;  ///< progress thread placement (OMGS_PROGRESS_CPU wins)
  GpuAwareMpi gpu_aware = GpuAwareMpi::automatic;  ///< OMGS_GPU_AWARE_MPI wins
  bool force_inline_progress = false;              ///< no progress thread; finish() drives MPI
  /// Honour the OMGS_* environment variables, which win over these options (the list:
  /// table of docs/api.md, "Environment variables (read at construction ...").
  bool read_environment = true;
  /// The watchdog: finish() waits this long for a group, then asks every rank how far it
  /// got and reports which ranks have not posted the group (see on_timeout). It also bounds
  /// the constructor's first agreement (every rank must arrive within it).
  double wait_timeout_s = 300.0;
  /// How long destruction (or MPI_Finalize) lets in-flight collectives finish, e.g. after
  /// comm_failed, before giving up with a message (their buffers are then leaked).
  double shutdown_timeout_s = 5.0;
  TimeoutAction on_timeout = TimeoutAction::report;
  double watchdog_query_s = 1.0;  ///< how long the watchdog waits for the ranks' answers

  BackwardTimes backward_times = BackwardTimes::automatic;
  /// Iterations measured before planning when backward times are measured. Meanwhile
  /// every layer is its own group (training proceeds, communication is layer-wise).
  int profile_iterations = 5;

  /// The closed loop (docs/planner.md, "Closed loop"): every `refit_iterations` iterations
  /// of a plan, fit the performance model to what the run measured (per group: backward,
  /// sparsify, allgather), agree on it across ranks (the maximum of each coefficient),
  /// replan with `planner`, and switch plans when the predicted gain is at least
  /// `replan_min_gain` of the current plan's predicted time. It settles (stops refitting)
  /// after a refit that keeps the plan, or after `max_replans` switches. On by default:
  /// its cost is bounded (at most max_replans + 1 windows, one of them possibly on a slower
  /// plan, and as many refits), while a plan the model mispredicts costs every iteration
  /// (docs/planner.md, "The closed loop by default"). 0 disables it.
  /// OMGS_REFIT_ITERATIONS, OMGS_MAX_REPLANS and OMGS_REPLAN_MIN_GAIN win.
  int refit_iterations = 5;
  int max_replans = 2;
  double replan_min_gain = 0.05;

  /// Accuracy at low density (docs/api.md, "Accuracy at low density"), after Deep Gradient
  /// Compression (Lin et al., ICLR 2018). None has an environment variable: like density,
  /// they change what the model learns, so the training code chooses them.
  ///
  /// Warm-up: over the first `warmup_iterations` iterations the density falls exponentially
  /// from `warmup_density` to `density` in `warmup_stages` equal stages (stage i of S uses
  /// warmup_density * (density / warmup_density)^(i / S)); from then on `density`. Each
  /// change replans for the new density (as set_density() does). 0 iterations: off.
  double warmup_density = 0.25;
  std::uint64_t warmup_iterations = 0;
  int warmup_stages = 4;
  /// Momentum correction with momentum factor masking: the runtime keeps a velocity u per
  /// element, u = momentum * u + gradient, accumulates u (not the gradient) into the
  /// residual, and clears u where the residual was sent. The application then applies the
  /// aggregated update with plain SGD (no momentum of its own). 0: off (plain error feedback).
  double momentum = 0.0;
  /// Local gradient clipping: before accumulation each layer's gradient on each rank is
  /// scaled so its L2 norm is at most clip_norm / sqrt(P) (the global threshold shared by
  /// the P ranks, as DGC does). 0: off.
  double clip_norm = 0.0;

  /// Chrome trace JSON (chrome://tracing, Perfetto) written by write_trace() and by the
  /// destructor; "%r" is replaced by the rank (without it, ranks > 0 insert ".<rank>"
  /// before the extension). Empty: no trace.
  std::string trace_path;
  /// Trace events kept in memory (allocated at construction; later events are dropped
  /// and counted).
  std::size_t trace_max_events = std::size_t{1} << 18;

  /// The sparse groups' wire format (PairWire, comm.hpp): bf16 (compact pairs, the rounding
  /// error kept in the residual) by default. OMGS_PAIR_WIRE wins. Every rank must agree.
  PairWire pair_wire = PairWire::bf16;

  /// The element type of the gradient views (docs/api.md, "16-bit gradients"): fp32, or bf16
  /// / fp16, whose views are gradient_bf16() / gradient_fp16(), ready(l, view) of that type,
  /// and aggregated_bf16() / aggregated_fp16(). The runtime widens each group's gradient to
  /// fp32 when the group is ready, keeps the residual and accumulation in fp32, and writes
  /// the aggregated gradient back rounded to the type (aggregated() keeps the fp32 one).
  /// No environment variable: it is the training code's type. Every rank must agree.
  GradientType gradient_type = GradientType::fp32;

  /// The dense groups' values on the wire (docs/api.md, "Dense groups in 16 bits"):
  /// automatic (the gradient type's: fp32 for fp32 gradients, bf16 / fp16 for those), fp32
  /// (one MPI allreduce of floats), or bf16 / fp16 (a reduce-scatter with fp32 partial sums
  /// and an allgather of the 16-bit means: half the bytes). A 16-bit form sends each group's
  /// gradient + residual rounded and keeps the rounding error in the residual (error
  /// feedback, as the compact pairs do), so no gradient mass is lost; the planner's dense
  /// costs count 2 bytes per element. OMGS_DENSE_WIRE wins. Every rank must agree.
  DenseWire dense_wire = DenseWire::automatic;
};

/// Outcome of a per-iteration call. Per-iteration calls never throw; last_error() has the
/// message naming the layer or group.
/// Which ranks see it: "local" statuses concern this rank's call only; "all ranks" ones
/// are returned by finish() on every rank alike (so every rank may act on them the same
/// way); "this rank or several" depends on the fault (a stalled peer times out every rank
/// that waits for it; an MPI error may hit one rank only).
enum class Status : std::uint8_t {
  ok = 0,
  unknown_layer,       ///< local: layer index out of range
  already_ready,       ///< local: ready(l) twice in one iteration
  not_all_ready,       ///< local: finish() before every layer was ready (nothing changed)
  shape_mismatch,      ///< local: ready(l, view) with a view of the wrong length or type
  nonfinite_gradient,  ///< all ranks: a rank's group held NaN/Inf; the group is skipped
  comm_failed,         ///< this rank or several: timeout (finish() may be retried), MPI error
  plan_failed,         ///< all ranks: planning from measured times failed (layer-wise kept)
  concurrent_call,     ///< local: ready/finish entered from a second thread meanwhile (ignored)
};
OMGS_EXPORT const char* to_string(Status status) noexcept;

struct IterationStats {
  Status status = Status::ok;
  int failed_group = -1;        ///< group of a nonfinite_gradient / comm_failed status
  std::uint64_t nonfinite = 0;  ///< non-finite entries this rank found
  double sparsify_s = 0.0;      ///< this rank's top-k + packing time
  /// The CPU time of the calling thread in those steps (CLOCK_THREAD_CPUTIME_ID): the wall
  /// time less what other threads took from it where ranks share cores. It counts neither
  /// the other threads of an OpenMP back-end nor a device's kernels (there it is the host's
  /// launch and fence time).
  double sparsify_cpu_s = 0.0;
  double finish_wait_s = 0.0;  ///< time finish() waited for communication
  double aggregate_s = 0.0;    ///< scatter-add time
  double iteration_s = 0.0;    ///< first ready() to the end of finish()
  /// This rank's contribution to the allgathers: k (index, value) pairs of 8 bytes per
  /// group. (With P ranks every rank receives P times as much; a ring allreduce of the
  /// dense gradient moves about 2 * 4 * n bytes per rank.) A sparse-allreduce group counts
  /// what its exchange really sent: pairs, counts and histograms.
  std::uint64_t bytes_sent = 0;
  /// This iteration: all ranks' pairs (P * sent) for allgather groups; for sparse-allreduce
  /// groups what their exchange really received.
  std::uint64_t bytes_received = 0;
  std::uint64_t iteration = 0;  ///< 0-based count of finished iterations
  bool profiling = false;       ///< layer-wise while backward times were measured
  bool replanned = false;       ///< the plan was built from the measured times after it
  /// The closed loop: the plan's predicted iteration (model in force) and this rank's
  /// measured one (its timeline's end, seconds from the start of backward).
  double predicted_s = 0.0;
  double measured_s = 0.0;
  std::uint32_t model_generation = 0;  ///< +1 at each refit of the performance model
  std::uint32_t plan_generation = 0;   ///< +1 at each change of plan (profiling, closed loop)
  bool refitted = false;               ///< the model was refitted after this iteration
  /// The pairs this rank sent, and their bytes per pair on the wire (8 for
  /// PairWire::pairs8; 0 without pairs): an allgather group's k pairs, a sparse-allreduce
  /// group's pairs to the regions' owners and its region's survivors (counts and histograms
  /// are not pairs).
  std::uint64_t pairs_sent = 0;
  double bytes_per_pair = 0.0;
};

/// The last refit of the closed loop (identical on every rank but measured_s / owner_wait_s).
struct RefitReport {
  std::uint64_t iteration = 0;        ///< the iteration after which it ran
  std::size_t iterations_fitted = 0;  ///< measured iterations it used
  double measured_s = 0.0;            ///< median measured iteration end on this rank
  double owner_wait_s = 0.0;          ///< median of finish()'s wait on this rank
  double predicted_current_s = 0.0;   ///< the plan in force, under the fitted model
  /// The loop's candidate under the fitted model: the configured planner's plan, or another
  /// planner's predicted at least replan_min_gain faster (docs/planner.md, "The loop's
  /// candidate set").
  double predicted_candidate_s = 0.0;
  std::size_t candidate_groups = 0;
  Planner candidate_planner = Planner::mgs;  ///< whose plan the candidate is
  bool switched = false;                     ///< the candidate replaced the plan
  bool explored = false;  ///< ... although predicted within replan_min_gain (tried once)
  /// The previous refit's switch measured slower than the plan it replaced: that plan is
  /// back (the loop settles). Compared on measured_iteration_s of the two windows.
  bool taken_back = false;
  bool settled = false;  ///< no further refits
  /// Agreed by every rank: the slowest rank's median iteration time (begin_backward() to
  /// the end of finish()) over the window, the figure a switch must improve.
  double measured_iteration_s = 0.0;
  /// The model in force after the refit (describe()): the fitted one, or on a take-back the
  /// one fitted to the returning plan's own window.
  std::string model;
  /// The agreed points it fitted, per group of the plan it measured: elements, sparsify
  /// (slowest rank's median) and allgather (fastest rank's median) seconds.
  std::vector<std::uint64_t> group_numel;
  std::vector<double> group_sparsify_s, group_allgather_s;
};

/// The measured side of the last iteration (rt.plan() is the predicted side).
struct RuntimeStats {
  IterationStats last;      ///< the last finished iteration's stats
  Timeline measured;        ///< its pipeline as measured on this rank (like Plan::predicted)
  ProgressStats progress;   ///< the progress engine's counters
  PlanFootprint footprint;  ///< the plan in force's, as the runtime holds it (plan.hpp)
};

/// The calibration's measurements and fit (when perf_model == "calibrate").
struct CalibrationReport {
  std::vector<std::uint64_t> topk_numel;
  std::vector<double> topk_s;  ///< this rank's fastest of three
  std::vector<std::uint64_t> allgather_pairs;
  std::vector<double> allgather_s;             ///< fastest repetition, each the slowest rank's time
  std::vector<std::uint64_t> allreduce_numel;  ///< the dense groups' MPI_Iallreduce, floats
  std::vector<double> allreduce_s;             ///< fastest repetition, each the slowest rank's
  double duration_s = 0.0;
  /// The dense groups' allreduce form (RuntimeOptions::dense_allreduce), chosen at
  /// construction whatever the perf model; the medians are NaN for a form not measured (all
  /// of them when the option forced the form). allreduce_s above timed this form.
  AllreduceFormChoice dense_allreduce;
};

namespace detail {
class RuntimeImpl;
}

class OMGS_EXPORT Runtime {
 public:
  /// Collective over comm (which it duplicates). Validates the layers and options, checks
  /// that every rank has the same layer list, density and planner (an omgs::Error on every
  /// rank naming the first difference, never a hang), calibrates or loads the performance
  /// model (taking the maximum over ranks), plans, checks the plan is identical everywhere,
  /// and allocates every buffer. Needs MPI and Kokkos initialized.
  Runtime(MPI_Comm comm, std::vector<LayerSpec> layers, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  std::size_t num_layers() const noexcept;
  /// RuntimeOptions::gradient_type: the type of gradient() / gradient_bf16() / _fp16().
  GradientType gradient_type() const noexcept;
  /// Layer l's slot of the flat gradient buffer: the training code writes the gradient here.
  /// Throws omgs::Error when RuntimeOptions::gradient_type is not fp32.
  GradientView gradient(std::size_t l) const;
  /// The same for gradient_type bf16 / fp16 (2 bytes per element); each throws omgs::Error
  /// naming the type in force when it is another.
  Bf16GradientView gradient_bf16(std::size_t l) const;
  Fp16GradientView gradient_fp16(std::size_t l) const;
  /// Marks layer l's gradient as written. When it completes its group (the group's lowest
  /// layer, in backward order), the group is sparsified on the device and handed to the
  /// progress thread, while backward continues.
  Status ready(std::size_t l) noexcept;
  /// Copies the user's view into layer l's slot, then ready(l). The view's type must be
  /// RuntimeOptions::gradient_type's (else Status::shape_mismatch, nothing changes).
  Status ready(std::size_t l, const ConstGradientView& grad) noexcept;
  Status ready(std::size_t l, const ConstBf16GradientView& grad) noexcept;
  Status ready(std::size_t l, const ConstFp16GradientView& grad) noexcept;
  /// Waits for every group, scatter-adds the received pairs (averaged over ranks) into the
  /// aggregated gradient and returns the iteration's stats. Afterwards the next iteration
  /// may begin. On not_all_ready nothing changes (call ready for the rest, then finish).
  IterationStats finish() noexcept;
  /// Layer l's averaged sparse gradient of the last finished iteration (fp32, whatever
  /// the gradient type: with bf16 / fp16 the value before its rounding to the type).
  ConstGradientView aggregated(std::size_t l) const;
  /// The same rounded to gradient_type bf16 / fp16; each throws omgs::Error naming the type
  /// in force when it is another.
  ConstBf16GradientView aggregated_bf16(std::size_t l) const;
  ConstFp16GradientView aggregated_fp16(std::size_t l) const;
  /// Layer l's velocity u of momentum correction (RuntimeOptions::momentum), after the
  /// masking of the last iteration. Throws omgs::Error when momentum correction is off.
  ConstGradientView momentum(std::size_t l) const;
  /// Collective, between iterations (after finish(), before the next ready()): from the next
  /// iteration on every group sends this fraction of its entries. Every rank must pass the
  /// same value. The planner runs again for it and the plan instance is rebuilt (buffers and
  /// k change; the residuals and velocities carry over; the closed loop starts a new window);
  /// it ends the warm-up schedule. Throws omgs::Error on every rank (a bad or differing
  /// density, a call within an iteration, or a rank that does not call it within
  /// wait_timeout_s); the plan in force then stays.
  void set_density(double density);
  /// The density in force (the warm-up schedule's or set_density()'s).
  double density() const noexcept;
  /// Layer l's error-feedback residual (what this rank has not sent yet). The runtime keeps
  /// each group's residual in one of two buffers and switches at each selection, so the view
  /// is valid until the next ready() of the layer's group (call residual(l) again then).
  ConstGradientView residual(std::size_t l) const;

  /// Optional: marks the start of the backward pass. It makes the measured timeline and
  /// the measured backward time of the first layer exact; without it the first ready()
  /// of an iteration is the reference and that layer's time is estimated from the others'.
  void begin_backward() noexcept;
  /// True while backward times are being measured (BackwardTimes::measure).
  bool profiling() const noexcept;
  /// The last finished iteration's pipeline as measured on this rank, in the same form
  /// as plan().predicted (seconds from the start of its backward pass).
  const Timeline& measured() const noexcept;
  /// Writes the Chrome trace of every recorded iteration (path: options.trace_path, or the
  /// given one, "%r" -> rank). Throws omgs::Error if the file cannot be written.
  void write_trace(const std::string& path = "") const;
  /// Writes an SVG Gantt chart: the plan's predicted pipeline above the measured one of
  /// the last finished iteration (lanes: compute, top-k, communication).
  void write_svg(const std::string& path) const;

  const Plan& plan() const noexcept;
  const std::vector<LayerSpec>& layers() const noexcept;
  const PerfModel& perf_model() const noexcept;
  const CalibrationReport& calibration() const noexcept;
  /// The closed loop's last refit (all zero before the first).
  const RefitReport& last_refit() const noexcept;
  /// Writes the model in force (after a refit: the fitted one) as alpha-beta JSON, the
  /// format RuntimeOptions::perf_model reads. Throws omgs::Error for the reference model
  /// or if the file cannot be written.
  void save_perf_model(const std::string& path) const;
  const IterationStats& last_stats() const noexcept;
  /// last_stats(), measured() and progress_stats() together (copies; not for the hot path).
  RuntimeStats stats() const;
  ProgressStats progress_stats() const;
  /// k of group g (pairs each rank sends).
  std::size_t group_k(std::size_t g) const;
  /// The watchdog's findings when the last finish() returned comm_failed on a timeout.
  const Diagnosis& last_diagnosis() const noexcept;
  /// The message of the last non-ok status.
  const std::string& last_error() const noexcept;
  int rank() const noexcept;
  int size() const noexcept;

 private:
  std::unique_ptr<detail::RuntimeImpl> impl_;
};

}  // namespace omgs
