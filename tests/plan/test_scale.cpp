// The scale study's inputs (docs/scale.md): the GPU top-k models agree with the select
// kernels' counts, the bf16 dense baseline halves the allreduce's bytes, a top-k model
// replaces a fabric's, and the sweep of the study's models on the new fabrics is ordered
// where it must be (bf16 <= fp32 dense, every plan above the backward pass, dense and
// mixed nondecreasing in P).
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <omgs/detail/select_cost.hpp>
#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

#include "omgs_catch.hpp"
#include "plan/json.hpp"

namespace {

std::string source_path(const std::string& rel) {
  return std::string(OMGS_SOURCE_DIR) + "/" + rel;
}

double derivation(const omgs::detail::JsonValue& doc, const char* key) {
  const omgs::detail::JsonValue* d = doc.find("derivation");
  REQUIRE(d != nullptr);
  const omgs::detail::JsonValue* v = d->find(key);
  INFO(key);
  REQUIRE(v != nullptr);
  return v->number();
}

}  // namespace

TEST_CASE("scale: the GPU top-k models are the kernels' counts over bandwidth", "[plan][scale]") {
  namespace d = omgs::detail;
  for (const char* file :
       {"examples/perf/gpu_topk_h100_sxm.json", "examples/perf/gpu_topk_h200.json"}) {
    INFO(file);
    std::ifstream in(source_path(file));
    std::stringstream text;
    text << in.rdbuf();
    const d::JsonValue doc = d::parse_json(text.str(), file);
    // The documented counts are the header's (which tests/select checks against the kernels).
    CHECK(derivation(doc, "bytes_per_entry") == d::select_one_read_bytes_per_entry());
    CHECK(derivation(doc, "bytes_per_selected") == d::select_one_read_bytes_per_selected());
    CHECK(derivation(doc, "runtime_bytes_per_selected") == d::sparsify_extra_bytes_per_selected);
    CHECK(derivation(doc, "launches") == d::select_one_read_launches());
    CHECK(derivation(doc, "runtime_launches") == d::sparsify_extra_launches);
    CHECK(derivation(doc, "round_trips") == d::select_one_read_round_trips);
    CHECK(derivation(doc, "runtime_round_trips") == d::sparsify_extra_round_trips);
    // And the coefficients are the formula applied to them (4 significant digits).
    const double per_selected =
        d::select_one_read_bytes_per_selected() + d::sparsify_extra_bytes_per_selected;
    const double c1 =
        (d::select_one_read_bytes_per_entry() + per_selected * derivation(doc, "density")) /
        derivation(doc, "memory_bandwidth_B_per_s");
    const double c0 =
        (d::select_one_read_launches() + d::sparsify_extra_launches) * derivation(doc, "launch_s") +
        (d::select_one_read_round_trips + d::sparsify_extra_round_trips) *
            derivation(doc, "round_trip_s");
    const omgs::TopkCost topk = omgs::load_topk_cost(source_path(file));
    CHECK(topk.form == omgs::TopkForm::linear);
    CHECK(topk.c1_s == Approx(c1).epsilon(1e-4));
    CHECK(topk.c0_s == Approx(c0).epsilon(1e-4));
  }
  // The new fabrics carry the H100 model.
  const omgs::TopkCost h100 =
      omgs::load_topk_cost(source_path("examples/perf/gpu_topk_h100_sxm.json"));
  for (const char* fabric : {"slingshot11", "infiniband_ndr400"}) {
    const omgs::TopkCost t =
        omgs::load_topk_cost(source_path("examples/perf/" + std::string(fabric) + ".json"));
    CHECK(t.c0_s == h100.c0_s);
    CHECK(t.c1_s == h100.c1_s);
  }
}

TEST_CASE("scale: bf16 allreduce and top-k replacement", "[plan][scale]") {
  omgs::CollectiveCosts ag, ar;
  ag.has_formula = ar.has_formula = true;
  ag.formula = {0.0, 1e-6, 0.0, 2e-11};
  ar.formula = {0.0, 2e-6, 0.0, 2e-11};
  const omgs::AlphaBetaModel fp32(omgs::TopkForm::nlogn, 0.0, 2e-10, ag, ar);
  const omgs::AlphaBetaModel bf16 = fp32.with_allreduce_element_bytes(2.0);
  const std::uint64_t n = 1'000'000;
  const double latency = 2e-6 * std::log2(64.0);
  // Same latency, half the bytes.
  CHECK(bf16.allreduce_s(n, 64) - latency ==
        Approx((fp32.allreduce_s(n, 64) - latency) / 2).epsilon(1e-12));
  CHECK(bf16.allgather_s(n, 64, 0.001) == fp32.allgather_s(n, 64, 0.001));
  CHECK_THROWS_WITH(fp32.with_allreduce_element_bytes(0.0), Catch::Contains("(0, 8]"));
  // The JSON form keeps the element size.
  const omgs::AlphaBetaModel back = omgs::AlphaBetaModel::from_json(bf16.to_json());
  CHECK(back.allreduce_element_bytes() == 2.0);
  CHECK(back.allreduce_s(n, 64) == bf16.allreduce_s(n, 64));
  CHECK_THAT(fp32.to_json(), !Catch::Contains("allreduce_element_bytes"));
  CHECK_THROWS_WITH(
      omgs::AlphaBetaModel::from_json(
          "{\"type\": \"alpha_beta\", \"topk\": {\"form\": \"linear\", \"c0_s\": 0, \"c1_s\": 0},"
          " \"allgather\": [{\"workers\": 2, \"alpha_s\": 0, \"beta_s_per_byte\": 0}],\n"
          " \"allreduce_element_bytes\": 16}",
          "m.json"),
      Catch::Contains("m.json:2: allreduce_element_bytes must be a number in (0, 8]"));
  // A top-k model replaces the fabric's top-k and nothing else.
  const omgs::AlphaBetaModel gpu = bf16.with_topk({omgs::TopkForm::linear, 5e-5, 3.6e-12});
  CHECK(gpu.topk_s(n) == Approx(5e-5 + 3.6e-12 * n));
  CHECK(gpu.allreduce_s(n, 64) == bf16.allreduce_s(n, 64));
  CHECK_THROWS_WITH(omgs::load_topk_cost("/nonexistent.json"),
                    Catch::Contains("cannot open the top-k model file"));
}

TEST_CASE("scale: the study's sweeps are ordered where they must be", "[plan][scale][sweep]") {
  omgs::OptimalBudget budget;
  budget.max_work = 3'000'000;  // short; the orderings below hold for any budget
  const std::vector<int> workers = omgs::parse_workers_list("2,8,...,2048");
  for (const char* model_name : {"llama_7b", "vit_l16"}) {
    const auto layers = omgs::load_model_csv(source_path("examples/models/") + model_name + ".csv");
    for (const char* fabric : {"slingshot11", "infiniband_ndr400"}) {
      const auto model =
          omgs::AlphaBetaModel::load(source_path("examples/perf/") + fabric + ".json");
      const auto rows = omgs::sweep_workers(layers, model, 0.001, workers, budget, 0.0);
      REQUIRE(rows.size() == workers.size());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const omgs::SweepRow& r = rows[i];
        INFO(model_name << " on " << fabric << ", P = " << r.workers);
        REQUIRE(r.has_bf16);
        CHECK(r.dense_bf16.predicted.iteration_end_s <= r.dense.predicted.iteration_end_s);
        for (const omgs::Plan* p : {&r.dense, &r.dense_bf16, &r.mgs, &r.optimal, &r.mixed})
          CHECK(p->predicted.iteration_end_s >= r.backward_s * (1 - 1e-12));
        CHECK(r.mixed.predicted.iteration_end_s <= r.dense.predicted.iteration_end_s);
        if (i == 0) continue;
        // Every collective costs more with more ranks, so the best dense grouping does too.
        CHECK(r.dense.predicted.iteration_end_s >=
              rows[i - 1].dense.predicted.iteration_end_s * (1 - 1e-12));
        CHECK(r.dense_bf16.predicted.iteration_end_s >=
              rows[i - 1].dense_bf16.predicted.iteration_end_s * (1 - 1e-12));
      }
    }
  }
}

TEST_CASE("scale: with the dense groups in bf16, mixed is never above the bf16 dense baseline",
          "[plan][scale][sweep]") {
  // omgs-plan --dense-wire bf16 (RuntimeOptions::dense_wire): the model in force counts 2
  // bytes per element for omgs' own dense groups too, so the mixed plan's dense candidate is
  // the bf16 baseline itself; the dense column stays the fp32 baseline.
  omgs::OptimalBudget budget;
  budget.max_work = 1'000'000;
  const std::vector<int> workers = omgs::parse_workers_list("4,64,...,4096");
  const auto layers = omgs::load_model_csv(source_path("examples/models/gpt2_small.csv"));
  for (const char* fabric : {"infiniband_ndr400", "ethernet_10g"}) {
    const auto fp32 = omgs::AlphaBetaModel::load(source_path("examples/perf/") + fabric + ".json");
    const auto bf16 = fp32.with_allreduce_element_bytes(2.0);
    for (const auto& r : omgs::sweep_workers(layers, bf16, 0.001, workers, budget)) {
      INFO(fabric << ", P = " << r.workers);
      REQUIRE(r.has_bf16);
      const auto fp32_rows = omgs::sweep_workers(layers, fp32, 0.001, {r.workers}, budget);
      CHECK(r.dense.predicted.iteration_end_s == fp32_rows[0].dense.predicted.iteration_end_s);
      CHECK(r.dense_bf16.predicted.iteration_end_s < r.dense.predicted.iteration_end_s);
      CHECK(r.mixed.predicted.iteration_end_s <= r.dense_bf16.predicted.iteration_end_s);
    }
  }
}
