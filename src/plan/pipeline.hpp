// Internal: the pipeline's timing recurrence, the one model of when each group's backward,
// top-k and communication start and end. predict(), the optimal search, the collective
// chooser and MGS all step it, so their times agree to the last bit: a planner's optimum
// is exactly the iteration end that predict() reports for its plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs::detail {

/// Where the pipeline stands after some groups: the end of the last top-k on the compute
/// stream and of the last communication on the network.
struct PipelineState {
  double compute_end_s = 0.0;
  double comm_end_s = 0.0;
};

/// The next group after `s`: its backward (tb_s) follows the last top-k, its top-k (ts_s)
/// follows its backward, and its communication (tc_s) starts once both its top-k and the
/// previous communication have ended. Every caller's rounding depends on this exact order
/// of operations: ((E + tb) + ts), then (max(D, that) + tc).
inline GroupTiming pipeline_step(const PipelineState& s, double tb_s, double ts_s, double tc_s) {
  GroupTiming t;
  t.backward_start_s = s.compute_end_s;
  t.topk_start_s = s.compute_end_s + tb_s;
  t.topk_end_s = t.topk_start_s + ts_s;
  t.comm_start_s = std::max(s.comm_end_s, t.topk_end_s);
  t.comm_end_s = t.comm_start_s + tc_s;
  return t;
}

/// The state after a group whose timing is `t`.
inline PipelineState pipeline_after(const GroupTiming& t) {
  return {t.topk_end_s, t.comm_end_s};
}

/// A group's backward time and element count. The backward time is summed from its highest
/// layer down, the order in which the backward pass produces them and MGS merges them.
struct GroupSums {
  double backward_s = 0.0;
  std::uint64_t numel = 0;
};
inline GroupSums group_sums(const std::vector<LayerSpec>& layers, const Group& group) {
  GroupSums sums;
  for (std::size_t l = group.end; l-- > group.begin;) {
    sums.backward_s = sums.backward_s + layers[l].backward_s;
    sums.numel += layers[l].numel;
  }
  return sums;
}

}  // namespace omgs::detail
