// Fuzz target: every planner of omgs::all_planners() on a layer list decoded from the input,
// and the invariants every plan must satisfy (see README.md, "The planner"):
//  * groups in plan order (groups[0] holds layer L-1), consecutive, non-empty, covering every
//    layer exactly once; group_of_layer consistent; group numel = sum of its layers;
//  * the predicted timeline finite and monotone;
//  * `optimal` no worse than any other planner, and equal to the exhaustive search (L <= 12);
//  * `mgs` identical to the literal transcription of the seed (tests/plan/seed_oracle.hpp).
// A violation prints a message on stderr and aborts.
//
// Input layout (read front to back; bytes past the end read as 0, so every input decodes):
//   [0]      number of layers L = 1 + b % 40
//   [1]      bits 0-1: P in {2, 4, 8, 16}; bit 2: alpha-beta model (else reference);
//            bit 3: alpha-beta top-k form nlogn (else linear)
//   [2..3]   density = 10^(-5 u), u = uint16 / 65535, so 1e-5 <= density <= 1
//   [4..6]   threshold_numel = 1 + uint24
//   then, alpha-beta only: c0_s, c1_s, alpha_s, beta_s_per_byte, 2 bytes each:
//            mantissa m (0 gives 0), exponent e: m / 255 * 10^-(e % 16)
//   then per layer (forward order): magnitude byte g, uint24 x, uint16 t:
//            numel = 1 + x % 10^(g % 8) (1 ..1e7), backward_s = t / 65535 * 1e-2
// No FuzzedDataProvider: the corpus replay test builds this file with g++ too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

#define OMGS_FUZZ_TARGET "fuzz_planners"
#include "fuzz_support.hpp"

#include "../plan/seed_oracle.hpp"

namespace {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // n bytes, little endian.
  std::uint64_t uint(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }
  double unit16() { return static_cast<double>(uint(2)) / 65535.0; }  // [0, 1]
  // A non-negative, finite coefficient in [0, 1], over 16 decades.
  double coefficient() {
    const std::uint8_t m = byte();
    const std::uint8_t e = byte();
    if (m == 0) return 0.0;
    return static_cast<double>(m) / 255.0 * std::pow(10.0, -static_cast<double>(e % 16));
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

struct Case {
  std::vector<omgs::LayerSpec> layers;
  std::unique_ptr<omgs::PerfModel> model;
  omgs::PlanConfig config;
};

Case decode(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  Case c;
  const std::size_t L = 1 + in.byte() % 40;
  const std::uint8_t flags = in.byte();
  static const int workers[] = {2, 4, 8, 16};
  c.config.workers = workers[flags & 3];
  c.config.density = std::pow(10.0, -5.0 * in.unit16());
  c.config.threshold_numel = 1 + in.uint(3);
  if (flags & 4) {
    const omgs::TopkForm form = (flags & 8) ? omgs::TopkForm::nlogn : omgs::TopkForm::linear;
    const double c0 = in.coefficient();
    const double c1 = in.coefficient();
    omgs::AlphaBeta ab;
    ab.alpha_s = in.coefficient();
    ab.beta_s_per_byte = in.coefficient();
    c.model = std::make_unique<omgs::AlphaBetaModel>(
        form, c0, c1, std::map<int, omgs::AlphaBeta>{{c.config.workers, ab}});
  } else {
    c.model = std::make_unique<omgs::ReferenceModel>();
  }
  static const std::uint64_t magnitude[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
  c.layers.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    const std::uint64_t scale = magnitude[in.byte() % 8];
    c.layers[l].name = "layer" + std::to_string(l);
    c.layers[l].numel = 1 + in.uint(3) % scale;
    c.layers[l].backward_s = in.unit16() * 1e-2;
  }
  return c;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string where(omgs::Planner planner, std::size_t g) {
  return "planner " + std::string(omgs::to_string(planner)) + ", group " + std::to_string(g);
}

void check_plan(const omgs::Plan& plan, omgs::Planner planner, const Case& c) {
  const std::vector<omgs::LayerSpec>& layers = c.layers;
  const std::size_t L = layers.size();
  const std::string name(omgs::to_string(planner));
  OMGS_FUZZ_REQUIRE(plan.planner == planner, name);
  OMGS_FUZZ_REQUIRE(!plan.groups.empty(), name);
  OMGS_FUZZ_REQUIRE(plan.group_of_layer.size() == L, name);
  OMGS_FUZZ_REQUIRE(plan.predicted.groups.size() == plan.groups.size(), name);
  OMGS_FUZZ_REQUIRE(plan.groups[0].end == L, name + ": groups[0] must hold layer L-1");
  std::vector<int> seen(L, 0);
  std::size_t expected_end = L;
  double prev_topk_end = 0.0, prev_comm_end = 0.0, comm_total = 0.0;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const omgs::Group& gr = plan.groups[g];
    OMGS_FUZZ_REQUIRE(gr.end == expected_end, where(planner, g) + " is not consecutive");
    OMGS_FUZZ_REQUIRE(gr.begin < gr.end, where(planner, g) + " is empty");
    std::uint64_t numel = 0;
    for (std::size_t l = gr.begin; l < gr.end; ++l) {
      ++seen[l];
      numel += layers[l].numel;
      OMGS_FUZZ_REQUIRE(plan.group_of_layer[l] == g,
                        where(planner, g) + ": group_of_layer[" + std::to_string(l) +
                            "] = " + std::to_string(plan.group_of_layer[l]));
    }
    OMGS_FUZZ_REQUIRE(gr.numel == numel, where(planner, g) + ": numel " + std::to_string(gr.numel) +
                                             ", layers sum to " + std::to_string(numel));
    expected_end = gr.begin;

    const omgs::GroupTiming& t = plan.predicted.groups[g];
    const std::string times = where(planner, g) + ": backward_start " + num(t.backward_start_s) +
                              " topk_start " + num(t.topk_start_s) + " topk_end " +
                              num(t.topk_end_s) + " comm_start " + num(t.comm_start_s) +
                              " comm_end " + num(t.comm_end_s);
    OMGS_FUZZ_REQUIRE(std::isfinite(t.backward_start_s) && std::isfinite(t.topk_start_s) &&
                          std::isfinite(t.topk_end_s) && std::isfinite(t.comm_start_s) &&
                          std::isfinite(t.comm_end_s),
                      times);
    OMGS_FUZZ_REQUIRE(t.backward_start_s == prev_topk_end, times);
    OMGS_FUZZ_REQUIRE(t.topk_start_s >= t.backward_start_s, times);
    OMGS_FUZZ_REQUIRE(t.topk_end_s >= t.topk_start_s, times);
    OMGS_FUZZ_REQUIRE(t.comm_start_s >= t.topk_end_s, times);
    OMGS_FUZZ_REQUIRE(t.comm_start_s >= prev_comm_end,
                      times + ", previous comm_end " + num(prev_comm_end));
    OMGS_FUZZ_REQUIRE(t.comm_end_s >= t.comm_start_s, times);
    comm_total += t.comm_end_s - t.comm_start_s;
    prev_topk_end = t.topk_end_s;
    prev_comm_end = t.comm_end_s;
  }
  OMGS_FUZZ_REQUIRE(expected_end == 0,
                    name + ": layers [0, " + std::to_string(expected_end) + ") are in no group");
  for (std::size_t l = 0; l < L; ++l)
    OMGS_FUZZ_REQUIRE(seen[l] == 1, name + ": layer " + std::to_string(l) + " is in " +
                                        std::to_string(seen[l]) + " groups");
  const omgs::Timeline& p = plan.predicted;
  const std::string totals = name + ": iteration_end " + num(p.iteration_end_s) + " compute_end " +
                             num(p.compute_end_s) + " non_overlapped " +
                             num(p.non_overlapped_comm_s) + " comm_total " + num(p.comm_total_s);
  OMGS_FUZZ_REQUIRE(std::isfinite(p.iteration_end_s) && std::isfinite(p.compute_end_s) &&
                        std::isfinite(p.non_overlapped_comm_s) && std::isfinite(p.comm_total_s),
                    totals);
  OMGS_FUZZ_REQUIRE(p.iteration_end_s == prev_comm_end, totals);
  OMGS_FUZZ_REQUIRE(p.compute_end_s == prev_topk_end, totals);
  OMGS_FUZZ_REQUIRE(p.iteration_end_s >= p.compute_end_s, totals);
  OMGS_FUZZ_REQUIRE(p.non_overlapped_comm_s >= 0.0, totals);
  OMGS_FUZZ_REQUIRE(p.comm_total_s >= 0.0, totals);
  // comm_total_s sums the allgather times; comm_end - comm_start gives them back up to one
  // rounding of comm_end per group.
  OMGS_FUZZ_REQUIRE(
      std::abs(p.comm_total_s - comm_total) <= 1e-9 * (comm_total + p.iteration_end_s), totals);
}

std::vector<std::vector<std::size_t>> as_index_lists(const std::vector<omgs::Group>& groups) {
  std::vector<std::vector<std::size_t>> out;
  for (const omgs::Group& g : groups) {
    std::vector<std::size_t> ids;
    for (std::size_t l = g.end; l-- > g.begin;) ids.push_back(l);
    out.push_back(ids);
  }
  return out;
}

std::string show(const std::vector<std::vector<std::size_t>>& groups) {
  std::string s;
  for (const auto& g : groups) {
    s += "[";
    for (std::size_t i = 0; i < g.size(); ++i) s += (i ? " " : "") + std::to_string(g[i]);
    s += "]";
  }
  return s;
}

std::string describe_case(const Case& c) {
  std::string s = "L = " + std::to_string(c.layers.size()) +
                  ", P = " + std::to_string(c.config.workers) +
                  ", density = " + num(c.config.density) + ", model " + c.model->describe();
  return s;
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Case c = decode(data, size);
  const std::size_t L = c.layers.size();
  std::map<omgs::Planner, omgs::Plan> plans;
  for (omgs::Planner planner : omgs::all_planners()) {
    try {
      plans[planner] = omgs::make_plan(planner, c.layers, *c.model, c.config);
    } catch (const omgs::Error& e) {
      omgs_fuzz::fail(
          "make_plan throws on a valid input", __LINE__,
          std::string(omgs::to_string(planner)) + ": " + e.what() + "; " + describe_case(c));
    }
    check_plan(plans[planner], planner, c);
  }

  const double best = plans.at(omgs::Planner::optimal).predicted.iteration_end_s;
  for (const auto& [planner, plan] : plans) {
    OMGS_FUZZ_REQUIRE(best <= plan.predicted.iteration_end_s * (1.0 + 1e-9),
                      "optimal " + num(best) + " > " + std::string(omgs::to_string(planner)) + " " +
                          num(plan.predicted.iteration_end_s) + "; " + describe_case(c));
  }
  if (L <= 12) {
    const double exhaustive =
        omgs::predict(c.layers, omgs::groups_optimal_exhaustive(c.layers, *c.model, c.config),
                      *c.model, c.config)
            .iteration_end_s;
    OMGS_FUZZ_REQUIRE(close(best, exhaustive), "optimal " + num(best) + ", exhaustive " +
                                                   num(exhaustive) + "; " + describe_case(c));
  }

  std::vector<std::vector<std::size_t>> expected =
      omgs_test::seed_mgs(c.layers, *c.model, c.config.workers, c.config.density);
  if (L == 1) expected = {{0}};  // the seed lists the only layer twice; omgs once
  const std::vector<std::vector<std::size_t>> got =
      as_index_lists(plans.at(omgs::Planner::mgs).groups);
  OMGS_FUZZ_REQUIRE(got == expected,
                    "mgs " + show(got) + ", seed " + show(expected) + "; " + describe_case(c));

  // The JSON form of a plan must be producible for every plan (no checks on its text here).
  for (const auto& [planner, plan] : plans)
    OMGS_FUZZ_REQUIRE(!omgs::plan_to_json(plan, c.layers, c.config).empty(),
                      std::string(omgs::to_string(planner)));
  return 0;
}
