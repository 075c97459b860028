// The planner never proposes a group the run cannot post (issue 48): each collective's row in
// the planner's table says the largest MPI count its exchange passes (max_mpi_count), and the
// runtime plans with PlanConfig::max_mpi_count = INT_MAX (and max_group_numel = 2^32 - 1, its
// 32-bit indices); each group's wire refuses at set-up
// (Wire::check, on every rank) what it cannot post. Here the two are held equal: over a grid
// of group sizes and P, every built-in row serves a group exactly where every wire the
// runtime may give it accepts it; over the scale study's sweep (every bundled model on every
// example fabric, P = 2 ... 4096, docs/scale.md), planned as the runtime plans (max_mpi_count
// INT_MAX, max_group_numel 2^32 - 1), every group of every plan the sweep makes is within the
// runtime's indices and accepted by its wires' set-up. The
// wires are made by make_wire, as the engine makes them, and judged by their own check(): no
// copy of their limits here.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/perf_model.hpp>
#include <omgs/plan.hpp>
#include <omgs/select.hpp>
#include <omgs/sweep.hpp>

#include "comm/wire.hpp"
#include "omgs_catch.hpp"
#include "plan/collective_table.hpp"

using omgs::Collective;
using omgs::GroupBuffers;
using omgs::WireKind;

namespace {

// Never read: check() only asks whether a buffer is set.
alignas(16) unsigned char storage[64];
template <class T>
T* some() {
  return reinterpret_cast<T*>(storage);
}

/// The GroupBuffers of every wire the runtime may give a group of `collective` (its
/// exchanges, src/runtime/exchange_*.cpp): the 8-byte pairs (a compact wire sends fewer
/// units), and a dense group in fp32 or 16 bits.
std::vector<GroupBuffers> wires_of(Collective collective, std::uint64_t n, std::uint64_t k) {
  GroupBuffers b;
  switch (collective) {
    case Collective::sparse:
      return {GroupBuffers{some<omgs::SparsePair>(), some<omgs::SparsePair>(), k}};
    case Collective::dense: {
      b.kind = WireKind::allreduce_sum;
      b.dense_send = some<float>();
      b.dense_recv = some<float>();
      b.dense_numel = n;
      GroupBuffers b16;
      b16.kind = WireKind::allreduce_mean16;
      b16.dense16_send = some<std::uint16_t>();
      b16.dense16_recv = some<std::uint16_t>();
      b16.dense_numel = n;
      b16.dense_wire = omgs::DenseWire::bf16;
      return {b, b16};
    }
    case Collective::sparse_allreduce:
      b = {some<omgs::SparsePair>(), some<omgs::SparsePair>(), k};
      b.kind = WireKind::sparse_allreduce;
      b.sparse_numel = n;
      b.dropped = some<omgs::SparsePair>();
      return {b};
    case Collective::allreduce_node:
      b.kind = WireKind::allreduce_node;
      b.dense_send = some<float>();
      b.dense_recv = some<float>();
      b.dense_numel = n;
      return {b};
    case Collective::sparse_node:
      b.kind = WireKind::sparse_node;
      b.dense_send = some<float>();
      b.dense_recv = some<float>();
      b.dense_numel = n;
      b.k = k;
      b.node_residual = some<float>();
      return {b};
  }
  return {};
}

/// "" if every wire of a group of `collective` posts n elements at density d among P ranks
/// (their set-up checks pass), else the first refusal.
std::string refusal(Collective collective, std::uint64_t n, int P, double d) {
  const std::uint64_t k = omgs::selected_count(n, d);
  omgs::detail::WireSetup setup;
  setup.ranks = P;
  for (const GroupBuffers& b : wires_of(collective, n, k)) {
    const std::string why = omgs::detail::make_wire(b)->check(0, setup);
    if (!why.empty()) return std::string(omgs::to_string(b.kind)) + ": " + why;
  }
  return "";
}

/// Whether the row of `collective` serves the group within the runtime's limit.
bool row_serves(Collective collective, std::uint64_t n, int P, double d) {
  const auto& row = omgs::detail::collective_row(collective);
  return row.max_mpi_count(n, P, d) <= omgs::detail::mpi_int_count;
}

const Collective built_in[] = {Collective::sparse, Collective::dense, Collective::sparse_allreduce,
                               Collective::allreduce_node, Collective::sparse_node};

}  // namespace

TEST_CASE("every row serves a group exactly where its wires' set-up accepts it",
          "[runtime][plan][large_count]") {
  const std::uint64_t int_max = INT_MAX;
  // Around the int limits of n, k P and n / P; below 2^32 (the indices' limit, not a count's).
  const std::uint64_t sizes[] = {1,       1000,        int_max / 4, int_max - 1,
                                 int_max, int_max + 1, 3000000000,  4294967295};
  for (const Collective c : built_in) {
    for (const std::uint64_t n : sizes)
      for (const int P : {1, 2, 3, 64, 319, 320, 4096})
        for (const double d : {0.001, 0.01, 0.5, 1.0}) {
          const std::string why = refusal(c, n, P, d);
          INFO(omgs::to_string(c) << ": n = " << n << ", P = " << P << ", density " << d
                                  << ": the wires say '" << why << "'");
          CHECK(row_serves(c, n, P, d) == why.empty());
        }
  }
}

TEST_CASE("an over-limit group is refused by its wire and not served by its row",
          "[runtime][plan][large_count]") {
  // The sparse allreduce's k P past an int: the wire refuses it, the row does not serve it.
  const std::uint64_t n = 6738415616;  // LLaMA-7B in one group
  CHECK_FALSE(refusal(Collective::sparse_allreduce, 4000000000, 4096, 0.001).empty());
  CHECK_FALSE(row_serves(Collective::sparse_allreduce, 4000000000, 4096, 0.001));
  // The two-level allreduce's n past an int (its node steps' counts).
  CHECK_FALSE(refusal(Collective::allreduce_node, 3000000000, 8, 0.001).empty());
  CHECK_FALSE(row_serves(Collective::allreduce_node, 3000000000, 8, 0.001));
  // The allgather and the dense allreduce split their posts: any size is served and posted.
  CHECK(refusal(Collective::sparse, n, 4096, 0.001).empty());
  CHECK(row_serves(Collective::sparse, n, 4096, 0.001));
  CHECK(refusal(Collective::dense, n, 4096, 0.001).empty());
  CHECK(row_serves(Collective::dense, n, 4096, 0.001));
}

TEST_CASE("no plan of the scale study's sweep has a group its wires refuse, P = 2 ... 4096",
          "[runtime][plan][large_count]") {
  const std::string dir = OMGS_EXAMPLES_DIR;
  const omgs::TopkCost topk = omgs::load_topk_cost(dir + "/perf/gpu_topk_h100_sxm.json");
  const std::vector<int> workers = omgs::parse_workers_list("2,4,...,4096");
  omgs::OptimalBudget budget;
  budget.max_work = 300000;  // a tenth of the scale study's (scripts/scale-study.sh): a test's time
  std::vector<std::string> refused;
  std::size_t groups = 0, past_indices = 0;
  for (const char* model :
       {"gpt2_xl", "llama_7b", "vit_l16", "resnet50", "bert_base", "gpt2_small", "vgg16"}) {
    const auto layers = omgs::load_model_csv(dir + "/models/" + model + ".csv");
    for (const char* fabric : {"ethernet_10g", "ethernet_25g", "infiniband_hdr200", "slingshot11",
                               "infiniband_ndr400"}) {
      const omgs::AlphaBetaModel perf =
          omgs::AlphaBetaModel::load(dir + "/perf/" + fabric + ".json").with_topk(topk);
      // As the runtime plans: every group's MPI counts within an int, its elements within
      // 32-bit indices.
      const auto rows = omgs::sweep_workers(layers, perf, 0.001, workers, budget, 0.0,
                                            omgs::SparseExchange::automatic, 0, INT_MAX, {},
                                            omgs::TopkSelector<>::max_supported_n);
      for (const omgs::SweepRow& r : rows) {
        std::vector<std::pair<const char*, const omgs::Plan*>> plans = {
            {"mixed", &r.mixed}, {"optimal", &r.optimal}, {"mgs", &r.mgs}, {"dense", &r.dense}};
        if (r.has_bf16) plans.push_back({"dense_bf16", &r.dense_bf16});
        if (r.has_sparse_allreduce) plans.push_back({"sparse_allreduce", &r.sparse_allreduce});
        for (const auto& [name, plan] : plans)
          for (const omgs::Group& g : plan->groups) {
            ++groups;
            // Past 32-bit indices: the runtime refuses the group before any wire is made.
            if (g.numel > omgs::TopkSelector<>::max_supported_n) {
              ++past_indices;
              refused.push_back(std::string(model) + " on " + fabric +
                                ", P = " + std::to_string(r.workers) + ", " + name + ": " +
                                std::to_string(g.numel) + " elements, past 32-bit indices");
              continue;
            }
            const std::string why = refusal(g.collective, g.numel, r.workers, 0.001);
            if (!why.empty())
              refused.push_back(std::string(model) + " on " + fabric +
                                ", P = " + std::to_string(r.workers) + ", " + name + ": " + why);
          }
      }
    }
  }
  INFO(groups << " groups, " << past_indices
              << " past 32-bit indices; refused: " << refused.size());
  for (std::size_t i = 0; i < refused.size(); ++i) UNSCOPED_INFO(refused[i]);
  CHECK(refused.empty());
}
