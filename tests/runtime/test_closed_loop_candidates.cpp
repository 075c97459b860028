// The closed loop's candidate set (docs/planner.md, "The loop's candidate set"): at a refit
// the loop compares the configured planner's plan (mgs) with the automatic candidates'
// all-sparse plans under the fitted model and switches to another planner's plan when that one is
// predicted faster by replan_min_gain; every rank switches to the same plan and no gradient mass is
// lost across the switch (or its take-back).
#include <mpi.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs_test::fill_gradient;
using omgs_test::MassLedger;
using omgs_test::same_everywhere;
using omgs_test::world_rank;

namespace {

/// Two layers: MGS always puts the last two layers of the backward pass in one group (the
/// seed's sweep never separates them), so its plan is one group. Layer 1 (first in the
/// backward pass) is large, layer 0 small with a long backward: in a group of its own,
/// layer 1's exchange overlaps layer 0's backward, so under any fitted model with a
/// non-zero allgather the two-group plans (layerwise, threshold, optimal) are predicted
/// faster than MGS's by about that allgather.
std::vector<omgs::LayerSpec> layers() {
  return {{"tail", 1000, 0.02}, {"head", 200000, 1e-4}};
}
constexpr double tail_backward_s = 0.02;

/// The model in force before the first refit: no per-group constants (c0 = alpha = 0), which
/// a window of one group keeps (a single group size cannot separate intercepts from
/// slopes). Written by rank 0, read by every rank.
std::string write_model() {
  return omgs_test::write_on_rank0(
      "closed_loop_candidates_model.json",
      "{\"type\": \"alpha_beta\", \"topk\": {\"form\": \"linear\", \"c0_s\": 0, "
      "\"c1_s\": 1e-9}, \"allgather\": [], \"allgather_formula\": {\"alpha_s\": 0, "
      "\"alpha_log2p_s\": 0, \"alpha_p_s\": 0, \"beta_s_per_byte\": 1e-9}}\n");
}

/// The plan's groups and collectives, and whose plan it is, as text.
std::string plan_text(const omgs::Runtime& rt) {
  std::string s(omgs::to_string(rt.plan().planner));
  for (const omgs::Group& g : rt.plan().groups)
    s += ";" + std::to_string(g.begin) + std::string(omgs::to_string(g.collective));
  return s;
}

}  // namespace

TEST_CASE("closed loop: the candidate is another planner's plan when predicted fastest",
          "[runtime][closed-loop]") {
  omgs::RuntimeOptions opt;
  // Layer 1's allgather: 400 kB per rank (small: the 12 iterations also run under TSan).
  opt.density = 0.25;
  opt.perf_model = write_model();
  opt.planner = omgs::Planner::mgs;
  opt.refit_iterations = 3;
  // The predicted gain is layer 1's allgather (its fitted slope, > 0, times its bytes; the
  // intercepts stay 0), 0.5-2% of an iteration dominated by its top-k on this machine:
  // margin 0 (any predicted gain) keeps the test about the candidate, not the machine.
  opt.replan_min_gain = 0.0;
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  REQUIRE(rt.plan().groups.size() == 1);  // MGS
  MassLedger books(rt);
  std::mt19937 rng(37 + world_rank());
  std::vector<float> g;
  bool switched = false;
  for (int it = 0; it < 12; ++it) {
    rt.begin_backward();
    for (std::size_t l = rt.num_layers(); l-- > 0;) {
      if (l == 0) omgs_test::spin_for(tail_backward_s);
      fill_gradient(rt, l, rng, g);
      books.add_gradient(l, g);
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    const omgs::IterationStats st = rt.finish();
    REQUIRE(st.status == omgs::Status::ok);
    books.add_applied(rt);
    if (!st.refitted) continue;
    const omgs::RefitReport& rep = rt.last_refit();
    CHECK(same_everywhere(std::string(omgs::to_string(rep.candidate_planner)) + "/" +
                          std::to_string(rep.predicted_candidate_s)));
    CHECK(same_everywhere(plan_text(rt)));  // every rank on the same plan
    if (rep.switched && !switched) {
      switched = true;
      // MGS's plan stays one group under the fitted model; a two-group plan of another
      // planner is predicted faster: the loop takes it, under that planner's name.
      CHECK(rep.candidate_planner != omgs::Planner::mgs);
      CHECK(rep.candidate_planner != omgs::Planner::automatic);
      CHECK(rt.plan().planner == rep.candidate_planner);
      CHECK(rt.plan().groups.size() == 2);
      CHECK(rt.plan().dense_groups() == 0);  // mgs's loop: all-sparse candidates only
      CHECK(rep.candidate_groups == rt.plan().groups.size());
      CHECK(rep.predicted_candidate_s <= (1 - opt.replan_min_gain) * rep.predicted_current_s);
      CHECK_FALSE(rep.explored);
    }
  }
  REQUIRE(switched);
  CHECK(rt.last_refit().settled);  // switched, then verified: kept or taken back
  std::string where;
  const bool conserved = books.conserved(rt, 1e-3, where);
  INFO(where);
  CHECK(conserved);
}
