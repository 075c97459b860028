// Internal: the closed loop, one component: the profiler (backward times measured from the
// spacing of ready() calls, each iteration's measured timeline, the one replan after
// profiling: profiler.cpp), the in-situ record of the iterations since the last refit
// (insitu.cpp), the refit of the model and the loop's decision (refit.cpp). It owns its
// state and reaches the runtime only through LoopHost: the planning inputs in force, read-only
// facts of the plan instance in force, and install_plan(), the one path of every plan change.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include <omgs/perf_model.hpp>
#include <omgs/plan.hpp>
#include <omgs/runtime.hpp>

#include "plan/fit.hpp"
#include "plan/loop_decision.hpp"
#include "runtime/plan_instance.hpp"
#include "runtime/trace.hpp"

namespace omgs::detail {

/// The runtime as the closed loop sees it (RuntimeImpl's side: loop_host.cpp).
class LoopHost {
 public:
  /// The runtime's communicator, agreed at construction.
  virtual MPI_Comm comm() const = 0;
  /// The layers (with the backward times) and the model the planners use now.
  virtual const std::vector<LayerSpec>& layers() const = 0;
  virtual const PerfModel& model() const = 0;
  /// Replaces them for the next plans; a null model keeps the one in force.
  virtual void set_planning_inputs(std::vector<LayerSpec> layers,
                                   std::unique_ptr<PerfModel> model) = 0;
  /// The planners' configuration: P, the density in force, the sparse exchange.
  virtual PlanConfig plan_config() const = 0;
  /// `planner`'s plan of these inputs, the sparse exchange in force applied; the optimal
  /// search under `budget`.
  virtual Plan plan_for(Planner planner, const std::vector<LayerSpec>& layers,
                        const PerfModel& model, const OptimalBudget& budget) const = 0;
  /// The bytes per pair of the pair format in force (the model's allgather term).
  virtual double wire_pair_bytes() const = 0;
  /// The plan in force and its generation (PlanInstance::generation). Read-only: the plan
  /// changes only through install_plan().
  virtual const Plan& plan() const = 0;
  virtual std::uint32_t plan_generation() const = 0;
  /// Group g's times in the iteration just finished (now_s() seconds).
  virtual GroupIteration group_iteration(std::size_t g) const = 0;
  /// PlanChange::rebuild: collective: builds the instance of `next` and swaps it in; on an
  /// error (agreed by every rank) the instance in force stays and the error is rethrown.
  /// PlanChange::repredict: `next` has the groups of the plan in force (the same on every
  /// rank): it replaces that plan's prediction, the instance stays; not collective.
  virtual void install_plan(Plan next, PlanChange change) = 0;
  void install_plan(Plan next) { install_plan(std::move(next), PlanChange::rebuild); }
  /// A trace event of the iteration in force; `label` a string literal or null
  /// (TraceRecorder::record).
  virtual void record(TraceKind kind, int group, double t0, double t1,
                      const char* label) noexcept = 0;
  void record(TraceKind kind, int group, double t0, double t1) noexcept {
    record(kind, group, t0, t1, nullptr);
  }
  /// The runtime's last_error().
  virtual void set_error(std::string message) noexcept = 0;

 protected:
  ~LoopHost() = default;
};

/// Gives every NaN entry of t the time per element of the others (0 if none is known).
void fill_by_rate(const std::vector<LayerSpec>& layers, std::vector<double>& t);

class ClosedLoop {
 public:
  explicit ClosedLoop(LoopHost& host) : host_(host) {}
  ClosedLoop(const ClosedLoop&) = delete;
  ClosedLoop& operator=(const ClosedLoop&) = delete;

  /// At construction: the options it follows, and every slot it records into (so that
  /// recording never allocates). `measuring`: backward times are profiled first.
  void start(const RuntimeOptions& options, std::size_t layers, bool measuring);
  bool profiling() const noexcept { return profiling_; }
  const RefitReport& last_refit() const noexcept { return last_refit_; }
  /// The last finished iteration's measured pipeline (close_iteration()); after a new plan
  /// instance, its groups, all zero, until an iteration of it finishes.
  const Timeline& measured() const noexcept { return measured_; }
  /// A new plan instance of `groups` groups is in force (install_plan, PlanChange::rebuild).
  void plan_installed(std::size_t groups);

  // The iteration's clock (runtime.cpp); timestamps are now_s() seconds.
  void begin_backward(double t) noexcept { begin_s = last_return_s = t; }
  /// The iteration's start when its first ready() entered at t_in.
  double iteration_start(double t_in) const noexcept {
    return std::isnan(begin_s) ? t_in : begin_s;
  }
  /// ready(l) entered at t_in: the training code computed layer l since the previous
  /// return (NaN for the first, without begin_backward()).
  void layer_ready(std::size_t l, double t_in) noexcept {
    layer_ready_s[l] = t_in;
    layer_bwd_s[l] = t_in - last_return_s;
  }
  void returned(double t) noexcept { last_return_s = t; }

  /// finish(), every group dealt with: the measured timeline and its trace events; the
  /// clock restarts.
  void close_iteration() noexcept;
  /// After finish(), at the same iteration on every rank: the profile (and after it the
  /// replan), the loop's stats and record, at the end of a window the refit. Collective
  /// where a replan or refit happens.
  void after_iteration(IterationStats& st) noexcept;
  /// The density changed the plan: a new window; a previous switch is not judged against
  /// a window of another density.
  void density_changed() noexcept;

 private:
  // profiler.cpp
  void finish_timeline() noexcept;
  void accumulate_profile(IterationStats& st) noexcept;
  void accumulate_backward() noexcept;
  void replan() noexcept;
  std::vector<LayerSpec> agreed_backward_times() const;
  // insitu.cpp
  void record_insitu(IterationStats& st) noexcept;
  void reset_window() noexcept;
  // refit.cpp
  void refit(std::uint64_t iteration) noexcept;
  LoopInputs loop_inputs(const RefitReport& rep, bool candidate_differs) const;
  std::vector<double> measured_ends() const;
  FittedModel agreed_fit(const FittedModel& prior, std::vector<LayerSpec>& next_layers,
                         RefitReport& rep);
  std::vector<double> backward_medians() const;
  void switch_plan(std::unique_ptr<PerfModel> fitted, std::vector<LayerSpec> next_layers,
                   RefitReport& rep);
  Plan candidate_plan(const std::vector<LayerSpec>& layers, const PerfModel& fitted,
                      const Plan& current) const;

  LoopHost& host_;
  // The options it follows (start()).
  Planner planner = Planner::mgs;
  int profile_iterations = 0, refit_iterations = 0, max_replans = 0;
  double replan_min_gain = 0.0;

  // The profiler: measured backward times, all allocated at start().
  bool profiling_ = false;  // still measuring: the plan in use is layer-wise
  int profiled = 0;
  std::vector<double> bwd_sum;  // per layer, over the profiled iterations where it was measured
  std::vector<int> bwd_count;
  std::size_t estimated_layer = 0;  // finish_timeline(): the layer whose time was estimated (or L)
  double begin_s = nan_s;           // begin_backward()
  double last_return_s = nan_s;     // when the previous ready() (or begin_backward) returned
  std::vector<double> layer_ready_s, layer_bwd_s;  // per layer: ready() entry, its compute
  Timeline measured_;  // the last iteration's measured pipeline (capacity L groups)

  // The window: the measured timelines of the iterations since the last refit, in slots
  // allocated at start() (capacity L groups each).
  std::vector<Timeline> window;     // refit_iterations slots
  std::vector<double> window_wait;  // per slot: finish()'s wait
  std::vector<double> window_bwd;   // per slot, L each: the layers' backward times (NaN: unknown)
  std::vector<double> window_iter;  // per slot: the iteration's time (IterationStats::iteration_s)
  std::size_t filled = 0;           // slots holding an iteration that finished ok
  std::size_t since_refit = 0;      // iterations finished since (the same on every rank)
  bool window_open = false;         // measuring (after profiling, if any)

  // The refit and the decision.
  int replans = 0;
  bool settled = false;
  bool explored = false;  // a switch on a predicted tie was tried
  // After a switch (last_refit_.switched), the plan it replaced, which may come back; its
  // window's agreed iteration time is last_refit_.measured_iteration_s.
  Plan before;
  std::uint32_t model_generation = 0;
  RefitReport last_refit_;
};

}  // namespace omgs::detail
