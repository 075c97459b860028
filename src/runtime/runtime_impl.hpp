// Internal: the runtime's state, grouped by lifetime, and the member functions each source
// file of src/runtime defines (docs/architecture.md, "where to change what"). It is
// composed of the plan instance in force (plan_instance.hpp) and the closed loop
// (closed_loop.hpp), which reaches it only through its member component Host.
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
#include "plan/collective_table.hpp"
#include "runtime/closed_loop.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime/plan_instance.hpp"
#include "runtime/trace.hpp"

namespace omgs::detail {

/// The bits of d, for agreement checks of doubles across ranks (max_min compares integers).
inline std::uint64_t double_bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

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

class RuntimeImpl {
 public:
  RuntimeImpl(MPI_Comm comm, std::vector<LayerSpec> layers, RuntimeOptions options);
  ~RuntimeImpl();
  RuntimeImpl(const RuntimeImpl&) = delete;
  RuntimeImpl& operator=(const RuntimeImpl&) = delete;

  /// The runtime as its closed loop's host (loop_host.cpp): a member component, the one
  /// path from the loop to the runtime's state.
  class Host final : public LoopHost {
   public:
    explicit Host(RuntimeImpl& r) : r_(r) {}
    MPI_Comm comm() const override;
    const std::vector<LayerSpec>& layers() const override;
    const PerfModel& model() const override;
    void set_planning_inputs(std::vector<LayerSpec> layers,
                             std::unique_ptr<PerfModel> model) override;
    PlanConfig plan_config() const override;
    Plan plan_for(Planner planner, const std::vector<LayerSpec>& layers, const PerfModel& model,
                  const OptimalBudget& budget) const override;
    double wire_pair_bytes() const override;
    const Plan& plan() const override;
    std::uint32_t plan_generation() const override;
    GroupIteration group_iteration(std::size_t g) const override;
    void install_plan(Plan next, PlanChange change) override;
    void record(TraceKind kind, int group, double t0, double t1,
                const char* label) noexcept override;
    void set_error(std::string message) noexcept override;

   private:
    RuntimeImpl& r_;
  };

 private:
  friend class omgs::Runtime;

  // setup.cpp: validation, environment, agreement, model choice.
  std::string check_local_input(std::string& trace_path);
  void check_agreement();
  void make_model();
  /// The bytes per pair of options.pair_wire, for the model's allgather term.
  double wire_pair_bytes() const;
  /// options.dense_wire resolved (automatic: the gradient type's): fp32, bf16 or fp16.
  DenseWire dense_wire() const noexcept;
  /// The planners' configuration, from the options (the one place it is built).
  PlanConfig plan_config() const {
    PlanConfig c{size, density_now, options.threshold_numel};
    c.sparse_exchange = options.sparse_exchange;
    c.collectives = options.collectives;
    c.memory_budget_bytes = options.memory_budget_bytes;
    // The wires refuse counts past an int at set-up: never propose such a group.
    c.max_mpi_count = mpi_int_count;
    // Nor a group past the 32-bit indices (check_sizes refuses it).
    c.max_group_numel = ExchangeContext::Selector::max_supported_n;
    return c;
  }
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
  /// Each group's exchange's bytes per rank (its registered footprint, 8-byte items).
  std::vector<std::uint64_t> group_bytes(const Plan& plan) const;
  void allocate_layers();
  GradientView layer_slice(const GradientView& flat, std::size_t l, const char* accessor) const;
  std::string group_label(const Plan& plan, std::size_t g) const;
  // plan_instance.cpp: the plan instance, built whole and swapped in.
  void install_plan(Plan next);  // collective: check, build, swap in one step
  /// PlanChange::repredict: `next` (the groups in force) replaces the plan's prediction.
  void repredict_plan(Plan next);
  std::unique_ptr<PlanInstance> build_instance(Plan next);
  void start_engine(PlanInstance& p) const;
  static std::vector<GroupBuffers> wires_of(const PlanInstance& p);
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
  void record(TraceKind kind, int group, double t0, double t1,
              const char* label = nullptr) noexcept {
    trace_.record(kind, iterations, group, t0, t1, label);
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

  // Set once by the constructor (setup.cpp, calibration.cpp); the closed loop replaces the
  // model and the layers' backward times (the profiler's replan the backward times too).
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

  // One iteration, from the first ready() to the end of finish() (runtime.cpp).
  std::vector<char> is_ready;
  std::size_t ready_count = 0;
  double iteration_start_s = 0.0;
  IterationStats stats, current;
  std::string last_error;
  std::uint64_t iterations = 0;
  std::atomic<int> in_call{0};  // ready / finish / begin_backward running (CallGuard)
  Diagnosis diagnosis;

  // What depends on the layers, allocated once, the plan instance, the trace, the loop.
  std::vector<std::size_t> layer_offset;  // layer l's elements start here in the flat buffers
  FlatBuffers flat_;                      // allocated once (allocate_layers)
  // gradient_prep.cpp: the layer offsets on the device (clipping), allocated once.
  Kokkos::View<std::size_t*, DeviceMemory> layer_offset_dev;
  std::unique_ptr<PlanInstance> instance_;  // the plan in force and what depends on it
  TraceRecorder trace_;
  Host host_{*this};
  ClosedLoop loop_{host_};  // the profiler, the in-situ record, the refit and replan
};

/// The closed loop's host by the name loop_host.cpp defines it under.
using RuntimeHost = RuntimeImpl::Host;

}  // namespace omgs::detail
