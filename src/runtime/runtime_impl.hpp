// Internal: the runtime's state, split into parts by lifetime, and the member functions
// each source file of src/runtime defines (docs/architecture.md, "where to change what").
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <omgs/runtime.hpp>
#include <omgs/select.hpp>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"
#include "plan/loop_decision.hpp"
#include "runtime/group_exchange.hpp"

namespace omgs::detail {

constexpr double nan_s = std::numeric_limits<double>::quiet_NaN();

/// The bits of d, for agreement checks of doubles across ranks (max_min compares integers).
inline std::uint64_t double_bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

/// Set once by the constructor (setup.cpp, calibration.cpp); the closed loop replaces the
/// model and the layers' backward times (the profiler's replan the backward times too).
struct SetupState {
  std::unique_ptr<OwnedComm> owned_comm;        // freed last, after the engine's
  std::unique_ptr<FinalizeHook> finalize_hook;  // stop_at_finalize() at MPI_Finalize
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int node_ranks = 1;  // ranks of comm on this node (the memory check counts them all)
  std::vector<LayerSpec> layers;
  RuntimeOptions options;
  bool measuring = false;  // backward times measured (at construction: agreed by all ranks)
  std::unique_ptr<PerfModel> model;
  CalibrationReport calibration;
  // The density in force (density_schedule.cpp): the warm-up schedule's while `warming`,
  // else options.density or set_density()'s. The plan and every k follow it.
  double density_now = 0.0;
  bool warming = false;
};

/// Everything that depends on the plan, built whole by RuntimeImpl::build_instance() and
/// swapped in by install_plan() in one step (plan_instance.cpp): construction, the
/// profiler's replan and the closed loop's switch take that one path. Not movable: the
/// exchanges refer to ctx.
struct PlanInstance {
  PlanInstance() = default;
  PlanInstance(const PlanInstance&) = delete;
  PlanInstance& operator=(const PlanInstance&) = delete;

  Plan plan;
  ExchangeContext ctx;  // what the exchanges share: selector, scratch, residual flags
  std::vector<std::unique_ptr<GroupExchange>> exchanges;  // one per group, plan order
  std::unique_ptr<ProgressEngine> engine;                 // posts what the exchanges describe
  // Per group, per iteration (runtime.cpp); timestamps are now_s() seconds.
  std::vector<std::size_t> remaining;  // layers of the group not yet ready
  std::vector<char> group_done;        // finish() has dealt with group g in this iteration
  std::vector<double> topk_start_s, topk_end_s, agg_start_s, agg_end_s;
  Timeline measured;  // the last iteration's measured pipeline (profiler.cpp)

  /// Every group waits for all of its layers again.
  void reset_remaining();
  /// Moves every group's residual that lives in resid_alt back to resid, before another
  /// plan groups the layers differently. Allocates nothing.
  void gather_residual();
};

/// One iteration, from the first ready() to the end of finish() (runtime.cpp).
struct IterationState {
  std::vector<char> is_ready;
  std::size_t ready_count = 0;
  double iteration_start_s = 0.0;
  IterationStats stats, current;
  std::string last_error;
  std::uint64_t iterations = 0;
  std::atomic<int> in_call{0};  // ready / finish / begin_backward running (CallGuard)
  Diagnosis diagnosis;
};

/// Measured backward times (profiler.cpp). Timestamps are now_s() seconds, all allocated
/// at construction.
struct ProfileState {
  bool profiling = false;  // still measuring: the plan in use is layer-wise
  int profiled = 0;
  std::vector<double> bwd_sum;  // per layer, over the profiled iterations where it was measured
  std::vector<int> bwd_count;
  std::size_t estimated_layer = 0;  // finish_timeline(): the layer whose time was estimated (or L)
  double begin_s = nan_s;           // begin_backward()
  double last_return_s = nan_s;     // when the previous ready() (or begin_backward) returned
  std::vector<double> layer_ready_s, layer_bwd_s;  // per layer: ready() entry, its compute
};

/// The closed loop (insitu.cpp, refit.cpp): the measured timelines of the iterations since
/// the last refit, in slots allocated at construction (capacity L groups each), so that
/// recording them never allocates.
struct LoopState {
  std::vector<Timeline> window;     // refit_iterations slots
  std::vector<double> window_wait;  // per slot: finish()'s wait
  std::vector<double> window_bwd;   // per slot, L each: the layers' backward times (NaN: unknown)
  std::vector<double> window_iter;  // per slot: the iteration's time (IterationStats::iteration_s)
  std::size_t filled = 0;           // slots holding an iteration that finished ok
  std::size_t since_refit = 0;      // iterations finished since (the same on every rank)
  int replans = 0;
  bool settled = false;
  bool explored = false;  // a switch on a predicted tie was tried
  // After a switch (last_refit.switched), the plan it replaced, which may come back; its
  // window's agreed iteration time is last_refit.measured_iteration_s.
  Plan before;
  bool window_open = false;  // measuring (after profiling, if any)
  std::uint32_t model_generation = 0, plan_generation = 0;
  RefitReport last_refit;
};

/// Gives every NaN entry of t the time per element of the others (0 if none is known).
void fill_by_rate(const std::vector<LayerSpec>& layers, std::vector<double>& t);

enum class TraceKind : std::uint8_t {
  backward,
  sparsify,
  queue,
  allgather,
  aggregate,
  wait,
  refit,   // the closed loop refitted the model (kept the plan)
  replan,  // ... and switched plans
};

/// The Chrome trace (trace.cpp): a fixed buffer of events, written at the end.
class TraceRecorder {
 public:
  /// Starts recording into `max_events` slots; the destructor of the runtime writes `path`.
  void start(std::string path, std::size_t max_events);
  void record(TraceKind kind, std::uint64_t iteration, int group, double t0, double t1) noexcept {
    if (events_.empty()) return;
    if (count_ == events_.size()) {
      ++dropped_;
      return;
    }
    events_[count_++] = {t0, t1, iteration, group, kind};
  }
  const std::string& path() const noexcept { return path_; }
  void write(const std::string& path, int rank, int size, std::size_t groups) const;

 private:
  struct Event {
    double t0_s = 0, t1_s = 0;  // now_s()
    std::uint64_t iteration = 0;
    std::int32_t group = -1;
    TraceKind kind = TraceKind::backward;
  };
  std::string path_;
  std::vector<Event> events_;
  std::size_t count_ = 0;
  std::uint64_t dropped_ = 0;
  double origin_s_ = 0.0;
};

/// The trace file of `rank`: "%r" -> rank; without it ranks > 0 insert ".<rank>" before
/// the extension.
std::string trace_file(const std::string& path, int rank, int size);

/// Marks a per-iteration call as running; a second thread entering meanwhile is refused
/// (Status::concurrent_call) instead of corrupting the iteration's state.
struct CallGuard {
  std::atomic<int>& flag;
  bool ok;
  explicit CallGuard(std::atomic<int>& f) noexcept
      : flag(f), ok(f.exchange(1, std::memory_order_acquire) == 0) {}
  ~CallGuard() {
    if (ok) flag.store(0, std::memory_order_release);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
};

class RuntimeImpl : SetupState, IterationState, ProfileState, LoopState {
 public:
  RuntimeImpl(MPI_Comm comm, std::vector<LayerSpec> layers, RuntimeOptions options);
  ~RuntimeImpl();

 private:
  friend class omgs::Runtime;

  // setup.cpp: validation, environment, agreement, model choice.
  std::string check_local_input(std::string& trace_path);
  void check_agreement();
  void make_model();
  /// The bytes per pair of options.pair_wire, for the model's allgather term.
  double wire_pair_bytes() const;
  /// The planners' configuration, from the options (the one place it is built).
  PlanConfig plan_config() const {
    PlanConfig c{size, density_now, options.threshold_numel};
    c.sparse_exchange = options.sparse_exchange;
    return c;
  }
  /// sparse_exchange = allreduce: the plan's sparse groups become sparse allreduces.
  Plan with_sparse_exchange(Plan plan) const;
  void check_plan(const Plan& plan);
  Plan initial_plan();
  void stop_at_finalize();
  /// False after MPI_Finalize stopped the engine (every call then fails).
  bool running() const noexcept { return instance_ && instance_->engine; }
  Status stopped_at_finalize() {  // every call after MPI_Finalize
    return fail(Status::comm_failed,
                "omgs: MPI_Finalize was called: the runtime was stopped; only destroy it");
  }
  void write_trace_file() noexcept;
  // calibration.cpp
  void calibrate();
  /// Collective: calibration.dense_allreduce, the dense groups' allreduce form (forced by
  /// the option, or measured).
  void choose_dense_allreduce();
  // buffers.cpp: sizes, the flat buffers, group names.
  void check_sizes(const Plan& plan) const;
  void allocate_layers();
  GradientView layer_slice(const GradientView& flat, std::size_t l, const char* accessor) const;
  std::string group_label(const Plan& plan, std::size_t g) const;
  // plan_instance.cpp: the plan instance, built whole and swapped in.
  void install_plan(Plan next);  // collective: check, build, swap in one step
  std::unique_ptr<PlanInstance> build_instance(Plan next);
  void start_engine(PlanInstance& p) const;
  const Plan& plan() const { return instance_->plan; }
  // runtime.cpp: the iteration.
  Status ready(std::size_t l) noexcept;
  void sparsify(std::size_t g);
  /// Group g's prepare interval: topk_start_s/topk_end_s and the iteration's sparsify_s /
  /// sparsify_cpu_s. The thread CPU clock (a system call, ~1.4 us) is read outside the wall
  /// interval, so sparsify_s does not count it.
  double begin_sparsify(std::size_t g) {
    const double cpu0 = thread_cpu_s();
    instance_->topk_start_s[g] = now_s();
    return cpu0;
  }
  void end_sparsify(std::size_t g, double cpu0) {
    PlanInstance& p = *instance_;
    p.topk_end_s[g] = now_s();
    current.sparsify_s += p.topk_end_s[g] - p.topk_start_s[g];
    current.sparsify_cpu_s += thread_cpu_s() - cpu0;
  }
  void submit(std::size_t g);
  Status fail(Status s, std::string message) {
    last_error = std::move(message);
    return s;
  }
  IterationStats finish() noexcept;  // the steps below
  IterationStats not_all_ready();
  WaitStatus wait_for_group(std::size_t g);
  IterationStats timed_out(std::size_t g);
  void complete_group(std::size_t g, WaitStatus w);
  void close_iteration(double finish_start);
  // profiler.cpp: measured backward times, the measured timeline, the replan.
  void finish_timeline() noexcept;
  void accumulate_profile(IterationStats& st) noexcept;
  void accumulate_backward() noexcept;
  void replan() noexcept;
  std::vector<LayerSpec> agreed_backward_times() const;
  // insitu.cpp: the closed loop's measurements; refit.cpp: its refit and replan.
  void start_loop();
  void record_insitu(IterationStats& st) noexcept;
  void reset_window() noexcept;
  void refit() noexcept;
  LoopInputs loop_inputs(const RefitReport& rep, bool candidate_differs) const;
  std::vector<double> measured_ends() const;
  std::vector<double> agreed_fit(const std::vector<double>& prior,
                                 std::vector<LayerSpec>& next_layers, RefitReport& rep);
  std::vector<double> backward_medians() const;
  void switch_plan(std::unique_ptr<PerfModel> fitted, std::vector<LayerSpec> next_layers,
                   RefitReport& rep);
  void record(TraceKind kind, int group, double t0, double t1) noexcept {
    trace_.record(kind, iterations, group, t0, t1);
  }
  // trace.cpp
  void write_svg(const std::string& path) const;
  // density_schedule.cpp: the warm-up schedule and set_density().
  void check_schedule_options() const;
  void start_schedule();
  void advance_schedule(IterationStats& st) noexcept;
  void set_density(double d);
  void apply_density(double d);
  // gradient_prep.cpp: clipping and momentum correction around a group's selection.
  void allocate_prep();
  void prepare_gradient(std::size_t g);
  void commit_momentum(std::size_t g);
  // gradient_type.cpp: 16-bit gradients, widened into the fp32 gradient when a group is
  // ready, the aggregated gradient narrowed back when it is applied.
  void allocate_gradient16();
  void widen_gradient(std::size_t g);
  void narrow_aggregate(std::size_t g);
  /// Layer l's slot of grad16 / agg16 as a view of T; throws naming the accessor unless
  /// `type` is the one in force.
  template <class T>
  Kokkos::View<T*, DeviceMemory> slice16(const Kokkos::View<std::uint16_t*, DeviceMemory>& flat,
                                         std::size_t l, GradientType type,
                                         const char* accessor) const;
  /// ready(l, view): the checks, then `copy` into layer l's slot, then ready(l).
  template <class View>
  Status ready_copy(std::size_t l, const View& grad, GradientType type) noexcept;

  std::vector<std::size_t> layer_offset;  // layer l's elements start here in the flat buffers
  FlatBuffers flat_;                      // allocated once (allocate_layers)
  // gradient_prep.cpp: the layer offsets on the device (clipping), allocated once.
  Kokkos::View<std::size_t*, DeviceMemory> layer_offset_dev;
  std::unique_ptr<PlanInstance> instance_;  // the plan in force and what depends on it
  TraceRecorder trace_;
};

}  // namespace omgs::detail
