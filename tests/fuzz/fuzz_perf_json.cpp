// Fuzz target: omgs::AlphaBetaModel::from_json on arbitrary text. Only omgs::Error may escape
// the parser. A model that parses must
//  * round trip: from_json(to_json()) gives bit-identical parameters and the same text;
//  * predict times that are >= 0 (never NaN) and non-decreasing in numel for every
//    `workers` of its table, and finite when every coefficient is at most 1e200 (the parser
//    accepts any finite coefficient, and c1 * n * log2(n) or beta * bytes overflow to +inf
//    for coefficients near DBL_MAX: that is arithmetic, not a bug);
//  * accept check_workers for every `workers` of its table and refuse P = 0;
//  * predict sparse allreduce times >= 0 (never NaN) wherever it knows them;
//  * keep every collective's line (table and formula) by name through the round trip and
//    predict each >= 0 (never NaN) wherever it knows P.
// A violation prints a message on stderr and aborts.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <omgs/plan.hpp>

#define OMGS_FUZZ_TARGET "fuzz_perf_json"
#include "fuzz_support.hpp"

namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<omgs::AlphaBetaModel> model;
  try {
    model.emplace(omgs::AlphaBetaModel::from_json(text, "fuzz"));
  } catch (const omgs::Error& e) {
    OMGS_FUZZ_REQUIRE(std::strlen(e.what()) > 0, "an empty error message");
    return 0;
  }

  // Round trip.
  const std::string json = model->to_json();
  std::optional<omgs::AlphaBetaModel> again;
  try {
    again.emplace(omgs::AlphaBetaModel::from_json(json, "fuzz-round-trip"));
  } catch (const omgs::Error& e) {
    omgs_fuzz::fail("to_json() does not parse back", __LINE__, std::string(e.what()) + "\n" + json);
  }
  OMGS_FUZZ_REQUIRE(again->topk_form() == model->topk_form(), json);
  OMGS_FUZZ_REQUIRE(same_bits(again->topk_c0_s(), model->topk_c0_s()),
                    num(model->topk_c0_s()) + " -> " + num(again->topk_c0_s()));
  OMGS_FUZZ_REQUIRE(same_bits(again->topk_c1_s(), model->topk_c1_s()),
                    num(model->topk_c1_s()) + " -> " + num(again->topk_c1_s()));
  OMGS_FUZZ_REQUIRE(again->allgather_table().size() == model->allgather_table().size(), json);
  for (const auto& [p, ab] : model->allgather_table()) {
    const auto it = again->allgather_table().find(p);
    OMGS_FUZZ_REQUIRE(it != again->allgather_table().end(),
                      "workers " + std::to_string(p) + " lost\n" + json);
    OMGS_FUZZ_REQUIRE(same_bits(it->second.alpha_s, ab.alpha_s),
                      num(ab.alpha_s) + " -> " + num(it->second.alpha_s));
    OMGS_FUZZ_REQUIRE(same_bits(it->second.beta_s_per_byte, ab.beta_s_per_byte),
                      num(ab.beta_s_per_byte) + " -> " + num(it->second.beta_s_per_byte));
  }
  // Every collective's line by name: the same tables and formulas, bit for bit.
  OMGS_FUZZ_REQUIRE(again->lines().size() == model->lines().size(), json);
  for (const auto& [name, costs] : model->lines()) {
    const omgs::CollectiveCosts* back = again->line(name);
    OMGS_FUZZ_REQUIRE(back != nullptr, "line " + name + " lost\n" + json);
    OMGS_FUZZ_REQUIRE(back->table.size() == costs.table.size(), name + "\n" + json);
    for (const auto& [p, ab] : costs.table) {
      const auto it = back->table.find(p);
      OMGS_FUZZ_REQUIRE(it != back->table.end() && same_bits(it->second.alpha_s, ab.alpha_s) &&
                            same_bits(it->second.beta_s_per_byte, ab.beta_s_per_byte),
                        name + " workers " + std::to_string(p) + "\n" + json);
    }
    const omgs::CollectiveFormula& f = costs.formula;
    const omgs::CollectiveFormula& g = back->formula;
    OMGS_FUZZ_REQUIRE(back->has_formula == costs.has_formula && same_bits(f.alpha_s, g.alpha_s) &&
                          same_bits(f.alpha_log2p_s, g.alpha_log2p_s) &&
                          same_bits(f.alpha_p_s, g.alpha_p_s) &&
                          same_bits(f.beta_s_per_byte, g.beta_s_per_byte),
                      name + "_formula\n" + json);
  }
  OMGS_FUZZ_REQUIRE(again->to_json() == json, json + "\n" + again->to_json());
  OMGS_FUZZ_REQUIRE(!model->describe().empty(), json);

  // Predictions.
  bool bounded = model->topk_c0_s() <= 1e200 && model->topk_c1_s() <= 1e200;
  for (const auto& [p, ab] : model->allgather_table())
    bounded = bounded && ab.alpha_s <= 1e200 && ab.beta_s_per_byte <= 1e200;
  static const std::uint64_t numels[] = {
      1, 2, 3, 1000, 1u << 20, 123456789, 1000000000000ull, std::uint64_t{1} << 62};
  static const double densities[] = {1e-5, 1e-3, 0.3, 1.0};
  auto valid = [&](double t) {
    return !std::isnan(t) && t >= 0.0 && (!bounded || std::isfinite(t));
  };
  std::size_t entries = 0;
  for (const auto& [p, ab] : model->allgather_table()) {
    if (++entries > 64) break;  // bound the work per input
    try {
      model->check_workers(p);
    } catch (const omgs::Error& e) {
      omgs_fuzz::fail("check_workers refuses a P of the table", __LINE__, e.what());
    }
    double prev_topk = 0.0;
    double prev_ag[4] = {0.0, 0.0, 0.0, 0.0};
    for (const std::uint64_t n : numels) {
      const double tk = model->topk_s(n);
      const std::string at = "numel " + std::to_string(n) + ", workers " + std::to_string(p);
      OMGS_FUZZ_REQUIRE(valid(tk), at + ": topk_s " + num(tk) + "\n" + json);
      OMGS_FUZZ_REQUIRE(tk >= prev_topk, at + ": topk_s " + num(tk) + " < " + num(prev_topk));
      prev_topk = tk;
      for (int d = 0; d < 4; ++d) {
        const double ag = model->allgather_s(n, p, densities[d]);
        OMGS_FUZZ_REQUIRE(valid(ag), at + ", density " + num(densities[d]) + ": allgather_s " +
                                         num(ag) + "\n" + json);
        OMGS_FUZZ_REQUIRE(ag >= prev_ag[d], at + ", density " + num(densities[d]) +
                                                ": allgather_s " + num(ag) + " < " +
                                                num(prev_ag[d]));
        prev_ag[d] = ag;
      }
    }
  }
  // The sparse allreduce (given or derived): >= 0, never NaN, for the P it knows.
  for (const int p : {2, 4, 64, 4096}) {
    if (!model->knows_sparse_allreduce(p)) continue;
    for (const std::uint64_t n : numels) {
      const double t = model->sparse_allreduce_s(n, p, 1e-3);
      OMGS_FUZZ_REQUIRE(!std::isnan(t) && t >= 0.0,
                        "numel " + std::to_string(n) + ", workers " + std::to_string(p) +
                            ": sparse_allreduce_s " + num(t) + "\n" + json);
    }
  }
  // Every line by name: >= 0, never NaN, where it knows P; the built-ins' virtuals agree.
  for (const auto& [name, costs] : model->lines()) {
    for (const int p : {1, 3, 64, 4096}) {
      if (!model->knows_collective(name, p)) continue;
      for (const std::uint64_t n : numels) {
        const double t = model->collective_s(name, n, p, 1e-3);
        OMGS_FUZZ_REQUIRE(!std::isnan(t) && t >= 0.0, name + ": numel " + std::to_string(n) +
                                                          ", workers " + std::to_string(p) + ": " +
                                                          num(t) + "\n" + json);
        if (name == "allreduce")
          OMGS_FUZZ_REQUIRE(same_bits(t, model->allreduce_s(n, p)), name + "\n" + json);
      }
    }
  }
  bool refused = false;
  try {
    model->check_workers(0);
  } catch (const omgs::Error&) {
    refused = true;
  }
  OMGS_FUZZ_REQUIRE(refused, "check_workers(0) accepted\n" + json);
  return 0;
}
