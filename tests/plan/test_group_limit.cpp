// PlanConfig::max_group_numel (issue 48): the runtime's 32-bit indices hold at most 2^32 - 1
// elements in a group, and its set-up refuses a larger one. The planners know it: no row
// serves a group past the limit, MGS merges no two groups into one past it, and the choosing
// planners (mgs_mixed, optimal, dense) keep every group within it; without a limit (a
// prediction) they merge as before.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "plan/collective_table.hpp"

using omgs::Collective;
using omgs::Planner;

namespace {

constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();

// A fast top-k and a slow start-up for every exchange (sparse and dense): each planner's best
// plan without a limit is one group of every layer.
class MergeAllModel final : public omgs::PerfModel {
 public:
  double topk_s(std::uint64_t n) const override { return 1e-15 * static_cast<double>(n); }
  double allgather_s(std::uint64_t n, int, double) const override {
    return 1.0 + 1e-15 * static_cast<double>(n);
  }
  void check_workers(int) const override {}
  std::string describe() const override { return "merge-all test model"; }
  bool knows_allreduce(int) const override { return true; }
  double allreduce_s(std::uint64_t n, int) const override {
    return 1.0 + 1e-15 * static_cast<double>(n);
  }
};

// Seven layers of 1e9 elements: 7e9 in all, four of them (4e9) within 2^32 - 1, five not.
std::vector<omgs::LayerSpec> seven_layers() {
  std::vector<omgs::LayerSpec> layers;
  for (int l = 0; l < 7; ++l) layers.push_back({"l" + std::to_string(l), 1'000'000'000, 1e-3});
  return layers;
}

}  // namespace

TEST_CASE("group limit: no row serves a group past max_group_numel", "[plan][table]") {
  using omgs::detail::ServeLimits;
  using omgs::detail::serves;
  for (Collective c : {Collective::sparse, Collective::dense, Collective::sparse_allreduce}) {
    const auto& row = omgs::detail::collective_row(c);
    CHECK(serves(row, u32_max, 4, 0.001, ServeLimits{0, 0, u32_max}));
    CHECK_FALSE(serves(row, u32_max + 1, 4, 0.001, ServeLimits{0, 0, u32_max}));
    CHECK(serves(row, u32_max + 1, 4, 0.001, ServeLimits{}));  // no limit: a prediction
  }
  omgs::PlanConfig c;
  CHECK(omgs::detail::serve_limits(c).unlimited());
  c.max_group_numel = 11;
  CHECK(omgs::detail::serve_limits(c).max_group_numel == 11);
  CHECK_FALSE(omgs::detail::serve_limits(c).unlimited());
}

TEST_CASE("group limit: the planners keep every group within 2^32 - 1 elements", "[plan][table]") {
  const MergeAllModel m;
  const auto layers = seven_layers();
  for (Planner p :
       {Planner::mgs, Planner::mgs_mixed, Planner::optimal, Planner::dense, Planner::mixed}) {
    INFO(omgs::to_string(p));
    omgs::PlanConfig c{4, 0.001, 8192};
    c.sparse_exchange = omgs::SparseExchange::allgather;
    const omgs::Plan free = omgs::make_plan(p, layers, m, c);
    CHECK(free.groups.size() == 1);  // 7e9 elements in one group: past the indices
    c.max_group_numel = u32_max;     // as the runtime plans
    const omgs::Plan limited = omgs::make_plan(p, layers, m, c);
    CHECK(limited.groups.size() == 2);  // the fewest: 4 + 3 layers or 3 + 4
    std::uint64_t total = 0;
    for (const omgs::Group& g : limited.groups) {
      CHECK(g.numel <= u32_max);
      total += g.numel;
    }
    CHECK(total == 7'000'000'000);
    // A lower limit (three layers' worth) splits further.
    c.max_group_numel = 3'000'000'000;
    for (const omgs::Group& g : omgs::make_plan(p, layers, m, c).groups)
      CHECK(g.numel <= 3'000'000'000);
  }
}

TEST_CASE("group limit: MGS cuts between its top two layers where they cannot be posted together",
          "[plan][table]") {
  const MergeAllModel m;
  // The seed's MGS always puts the last two layers in one group; 2 x 3e9 is past 2^32 - 1.
  const std::vector<omgs::LayerSpec> layers = {
      {"a", 1000, 1e-3}, {"b", 3'000'000'000, 1e-3}, {"c", 3'000'000'000, 1e-3}};
  omgs::PlanConfig c{4, 0.001, 8192};
  c.sparse_exchange = omgs::SparseExchange::allgather;
  const omgs::Plan free = omgs::make_plan(Planner::mgs, layers, m, c);
  REQUIRE(free.groups.size() == 1);
  c.max_group_numel = u32_max;
  const omgs::Plan limited = omgs::make_plan(Planner::mgs, layers, m, c);
  REQUIRE(limited.groups.size() == 2);
  CHECK(limited.groups[0].begin == 2);              // c alone
  CHECK(limited.groups[1].numel == 3'000'001'000);  // b with a
  // A layer past the limit on its own is no reason to cut: no grouping can post it.
  const std::vector<omgs::LayerSpec> huge = {
      {"a", 1000, 1e-3}, {"b", 1000, 1e-3}, {"c", 5'000'000'000, 1e-3}};
  CHECK(omgs::make_plan(Planner::mgs, huge, m, c).groups.size() == 1);
}
