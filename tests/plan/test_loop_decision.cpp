// The closed loop's decision after a refit (src/plan/loop_decision.hpp), without MPI.
#include "omgs_catch.hpp"
#include "plan/loop_decision.hpp"

using omgs::detail::decide;
using omgs::detail::LoopAction;
using omgs::detail::LoopInputs;

namespace {
LoopInputs differing(double current_s, double candidate_s) {
  LoopInputs in;
  in.candidate_differs = true;
  in.predicted_current_s = current_s;
  in.predicted_candidate_s = candidate_s;
  in.min_gain = 0.05;
  in.max_replans = 2;
  return in;
}
}  // namespace

TEST_CASE("loop decision: a predicted gain above min_gain switches, then verifies",
          "[plan][closed-loop]") {
  const auto d = decide(differing(1.0, 0.9));
  CHECK(d.action == LoopAction::switch_gain);
  CHECK_FALSE(d.settled);  // the next window measures the new plan
}

TEST_CASE("loop decision: the same plan, or no switches left, keeps and settles",
          "[plan][closed-loop]") {
  LoopInputs in = differing(1.0, 0.5);
  in.candidate_differs = false;
  CHECK(decide(in).action == LoopAction::keep);
  CHECK(decide(in).settled);
  in = differing(1.0, 0.5);
  in.replans = 2;
  CHECK(decide(in).action == LoopAction::keep);
  CHECK(decide(in).settled);
}

TEST_CASE("loop decision: a predicted tie is explored once; a predicted loss is kept",
          "[plan][closed-loop]") {
  LoopInputs in = differing(1.0103, 1.0102);  // VGG-16, 4 hosts, 1 Gbit/s: 6 groups vs 1
  CHECK(decide(in).action == LoopAction::explore);
  CHECK_FALSE(decide(in).settled);
  in = differing(1.0, 1.04);  // within min_gain, the other way
  CHECK(decide(in).action == LoopAction::explore);
  in.explored = true;
  CHECK(decide(in).action == LoopAction::keep);
  CHECK(decide(in).settled);
  CHECK(decide(differing(1.0, 1.06)).action == LoopAction::keep);
  in = differing(1.0, 1.0);
  in.min_gain = 0.0;  // no margin: only a gain switches, nothing is a tie
  CHECK(decide(in).action == LoopAction::switch_gain);
  in.predicted_candidate_s = 1.0 + 1e-12;
  CHECK(decide(in).action == LoopAction::keep);
}

TEST_CASE("loop decision: the tie widens to explore_margin (a plan that communicates far less)",
          "[plan][closed-loop]") {
  LoopInputs in = differing(1.0, 1.064);  // 2 hosts, 10 Gbit/s: MGS's plan against all dense
  CHECK(decide(in).action == LoopAction::keep);
  in.explore_margin = 0.10;
  CHECK(decide(in).action == LoopAction::explore);
  CHECK_FALSE(decide(in).settled);
  in.explored = true;  // once only
  CHECK(decide(in).action == LoopAction::keep);
  in = differing(1.0, 1.11);
  in.explore_margin = 0.10;
  CHECK(decide(in).action == LoopAction::keep);
  in = differing(1.0, 0.96);  // a margin narrower than min_gain changes nothing
  in.explore_margin = 0.01;
  CHECK(decide(in).action == LoopAction::explore);
}

TEST_CASE("loop decision: a switch that measured slower is taken back, and the loop settles",
          "[plan][closed-loop]") {
  LoopInputs in = differing(1.0, 0.8);  // even with a further predicted gain
  in.verifying = true;
  in.replans = 1;
  in.measured_before_s = 0.948;
  in.measured_s = 1.071;
  CHECK(decide(in).action == LoopAction::take_back);
  CHECK(decide(in).settled);
  in.measured_s = 0.9;  // faster: it stays, and the loop goes on deciding
  CHECK(decide(in).action == LoopAction::switch_gain);
  in.candidate_differs = false;
  CHECK(decide(in).action == LoopAction::keep);
  CHECK(decide(in).settled);
}
