// Internal: the closed loop's decision after a refit (docs/planner.md "Closed loop"): keep
// the plan, switch to the planner's candidate, or take back the last switch because the
// plan it replaced measured faster. Pure C++17 like the rest of plan
// (tests/plan/test_loop_decision.cpp); every input is agreed across ranks, so every rank
// decides the same.
#pragma once

#include <algorithm>

namespace omgs::detail {

struct LoopInputs {
  bool candidate_differs = false;  ///< the candidate's groups are not the plan's
  double predicted_current_s = 0;  ///< the plan in force, under the fitted model
  double predicted_candidate_s = 0;
  double min_gain = 0.05;  ///< RuntimeOptions::replan_min_gain
  int replans = 0;         ///< switches so far (a take-back is not one)
  int max_replans = 2;
  bool explored = false;         ///< a switch on a tie was already tried
  double explore_margin = 0;     ///< a tie is within max(min_gain, this) (loop_explore_margin)
  bool verifying = false;        ///< the window just measured follows a switch
  double measured_s = 0;         ///< the plan in force: the window's iteration time
  double measured_before_s = 0;  ///< verifying: the plan the switch replaced, its window's
};

enum class LoopAction {
  keep,         ///< the plan stays
  switch_gain,  ///< the candidate is predicted at least min_gain faster
  explore,      ///< the candidate is within the tie margin of the plan (the model cannot tell
                ///< them apart): tried once, and the measurement decides
  take_back,    ///< the last switch measured slower than the plan it replaced: that one returns
};

struct LoopDecision {
  LoopAction action = LoopAction::keep;
  bool settled = true;  ///< no further refits
};

/// A switch is verified by the next window: if the new plan measured slower than the one
/// it replaced, that one comes back and the loop settles. Otherwise the candidate replaces
/// the plan when it is predicted to gain at least min_gain, or, once, when it is predicted
/// within max(min_gain, explore_margin) either way; within max_replans switches. The loop settles
/// after a keep (or a take-back); after a switch it measures one more window.
inline LoopDecision decide(const LoopInputs& in) {
  LoopDecision d;
  if (in.verifying && in.measured_s > in.measured_before_s) {
    d.action = LoopAction::take_back;
    return d;
  }
  if (!in.candidate_differs || in.replans >= in.max_replans) return d;
  const double gain = in.predicted_current_s - in.predicted_candidate_s;
  const double margin = in.min_gain * in.predicted_current_s;
  const double tie = std::max(in.min_gain, in.explore_margin) * in.predicted_current_s;
  if (gain >= margin)
    d.action = LoopAction::switch_gain;
  else if (!in.explored && gain > -tie)
    d.action = LoopAction::explore;
  d.settled = d.action == LoopAction::keep;
  return d;
}

}  // namespace omgs::detail
