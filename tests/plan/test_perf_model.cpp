#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"

namespace {
std::string error_of_json(const std::string& text) {
  try {
    omgs::AlphaBetaModel::from_json(text, "model.json");
  } catch (const omgs::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("reference model reproduces the original constants", "[plan][perf]") {
  omgs::ReferenceModel m;
  CHECK(m.topk_s(0) == 0.0);
  CHECK(m.topk_s(1) == 0.0);  // log2(1) = 0
  CHECK(m.topk_s(1024) == 2.18896957e-10 * 1024.0 * 10.0);
  // P = 4, density 0.001, 1000 elements: size = 1000*4*4*0.001 = 16 bytes -> small table.
  CHECK(m.allgather_s(1000, 4, 0.001) == (2.7e-3 + 1.3e-8 * 16.0) * 2);
  // P = 16, 1e9 elements at density 0.01: 6.4e8 bytes -> large table.
  CHECK(m.allgather_s(1'000'000'000, 16, 0.01) ==
        (2.1e-3 + 1.7e-8 * (1'000'000'000.0 * 16 * 4 * 0.01)) * 2);
  // The switch is at exactly 1 MiB: size < 1 MiB is small.
  const std::uint64_t n = 1024 * 1024 / (2 * 4);  // P = 2, d = 1: size = n*8 = 1 MiB
  CHECK(m.allgather_s(n, 2, 1.0) == (4.4e-3 + 5.8e-9 * 1048576.0) * 2);
  CHECK(m.allgather_s(n - 1, 2, 1.0) == (1.6e-3 + 1.0e-8 * 1048568.0) * 2);
  CHECK(m.allgather_s(0, 3, 0.1) == 0.0);
  CHECK_NOTHROW(m.check_workers(8));
  CHECK_THROWS_WITH(m.allgather_s(10, 3, 0.1), Catch::Contains("not P = 3"));
  CHECK_THROWS_AS(m.check_workers(32), omgs::Error);
}

TEST_CASE("alpha-beta model predicts with the bytes really received", "[plan][perf]") {
  omgs::AlphaBetaModel m(omgs::TopkForm::linear, 1e-5, 2e-9, {{4, {1e-4, 1e-9}}});
  CHECK(m.topk_s(0) == 0.0);
  CHECK(m.topk_s(1000) == 1e-5 + 2e-9 * 1000.0);
  // k = ceil(0.01 * 1000) = 10 pairs of 8 bytes from each of 4 ranks = 320 bytes.
  CHECK(omgs::AlphaBetaModel::bytes_received(1000, 4, 0.01) == 320.0);
  CHECK(m.allgather_s(1000, 4, 0.01) == 1e-4 + 1e-9 * 320.0);
  CHECK_THROWS_WITH(m.allgather_s(1000, 2, 0.01), Catch::Contains("no allgather cost for P = 2"));

  omgs::AlphaBetaModel nl(omgs::TopkForm::nlogn, 0.0, 1e-9, {{2, {0.0, 0.0}}});
  CHECK(nl.topk_s(8) == 1e-9 * (8.0 * 3.0));
}

TEST_CASE("as_alpha_beta: the alpha-beta model itself, nullptr for another family",
          "[plan][perf]") {
  const omgs::AlphaBetaModel ab(omgs::TopkForm::linear, 1e-5, 2e-9, {{4, {1e-4, 1e-9}}});
  const omgs::PerfModel& as_base = ab;
  CHECK(as_base.as_alpha_beta() == &ab);
  CHECK(omgs::ReferenceModel().as_alpha_beta() == nullptr);
  const auto loaded = omgs::make_perf_model("reference");
  CHECK(loaded->as_alpha_beta() == nullptr);
}

TEST_CASE("alpha-beta model JSON round trip", "[plan][perf][json]") {
  omgs::AlphaBetaModel m(omgs::TopkForm::nlogn, 1.25e-5, 3.3e-10,
                         {{2, {1.5e-5, 1e-10}}, {4, {2.5e-5, 1.7e-10}}});
  const std::string text = m.to_json();
  const omgs::AlphaBetaModel back = omgs::AlphaBetaModel::from_json(text);
  CHECK(back.topk_form() == omgs::TopkForm::nlogn);
  CHECK(back.topk_c0_s() == m.topk_c0_s());
  CHECK(back.topk_c1_s() == m.topk_c1_s());
  REQUIRE(back.allgather_table().size() == 2);
  CHECK(back.allgather_table().at(4).beta_s_per_byte == 1.7e-10);
  CHECK(back.to_json() == text);

  const std::string path = "omgs_test_model_roundtrip.json";
  m.save(path);
  const omgs::AlphaBetaModel loaded = omgs::AlphaBetaModel::load(path);
  CHECK(loaded.to_json() == text);
  const auto via_factory = omgs::make_perf_model(path);
  CHECK(via_factory->allgather_s(12345, 2, 0.01) == m.allgather_s(12345, 2, 0.01));
  std::remove(path.c_str());
  CHECK(dynamic_cast<omgs::ReferenceModel*>(omgs::make_perf_model("reference").get()) != nullptr);
  CHECK_THROWS_WITH(omgs::make_perf_model("/nonexistent/model.json"),
                    Catch::Contains("cannot open the performance model file"));
}

TEST_CASE("malformed alpha-beta JSON names what is wrong", "[plan][perf][json]") {
  const std::string good_topk = R"("topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9})";
  const std::string good_ag =
      R"("allgather": [{"workers": 2, "alpha_s": 1e-5, "beta_s_per_byte": 1e-10}])";
  CHECK(error_of_json("{\"type\": \"alpha_beta\", " + good_topk + ", " + good_ag + "}").empty());
  CHECK(error_of_json("").find("model.json: line 1, column 1") != std::string::npos);
  CHECK(error_of_json("[1, 2]").find("must be an object") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"alpha_beta\", " + good_ag + "}")
            .find("missing member \"topk\"") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"other\", " + good_topk + ", " + good_ag + "}")
            .find("expected \"alpha_beta\"") != std::string::npos);
  CHECK(
      error_of_json(R"({"type": "alpha_beta", "topk": {"form": "cubic", "c0_s": 0, "c1_s": 1}, )" +
                    good_ag + "}")
          .find("\"form\" is \"cubic\"") != std::string::npos);
  CHECK(error_of_json(
            R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": "x", "c1_s": 1}, )" +
            good_ag + "}")
            .find("\"c0_s\" must be a number, not a string") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"alpha_beta\", " + good_topk +
                      R"(, "allgather": [{"workers": 2.5, "alpha_s": 0, "beta_s_per_byte": 0}]})")
            .find("allgather[0]: \"workers\" must be a positive integer") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"alpha_beta\", " + good_topk +
                      R"(, "allgather": [{"workers": 2, "alpha_s": -1, "beta_s_per_byte": 0}]})")
            .find("must be finite and >= 0") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"alpha_beta\", " + good_topk + R"(, "allgather": []})")
            .find("allgather table is empty") != std::string::npos);
  CHECK(error_of_json("{\"type\": \"alpha_beta\",\n " + good_topk + ",\n " + good_ag + ",}")
            .find("line 3") != std::string::npos);
}

TEST_CASE("alpha-beta coefficients whose predictions overflow are rejected, with the line",
          "[plan][perf]") {
  using omgs::AlphaBeta;
  CHECK_THROWS_WITH(omgs::AlphaBetaModel(omgs::TopkForm::nlogn, 0.0, 1e300, {{4, {0.0, 0.0}}}),
                    Catch::Contains("topk c1_s = 1.0000000000000001e+300 makes the predicted"));
  CHECK_THROWS_WITH(omgs::AlphaBetaModel(omgs::TopkForm::linear, 0.0, 0.0, {{4, {0.0, 1e308}}}),
                    Catch::Contains("workers 4: beta_s_per_byte = 1e+308"));
  CHECK_NOTHROW(omgs::AlphaBetaModel(omgs::TopkForm::linear, 1e300, 1e280, {{4, {1e300, 1e280}}}));
  const std::string doc =
      "{\"type\": \"alpha_beta\",\n \"topk\": {\"form\": \"linear\", \"c0_s\": 0,\n"
      " \"c1_s\": 1e308},\n \"allgather\": [{\"workers\": 4, \"alpha_s\": 0, "
      "\"beta_s_per_byte\": 0}]}";
  CHECK_THROWS_WITH(omgs::AlphaBetaModel::from_json(doc, "m.json"),
                    Catch::StartsWith("m.json:3: topk c1_s = 1e+308"));
}

TEST_CASE("alpha-beta model: bytes per pair of the pair format in force", "[plan][perf]") {
  const omgs::AlphaBetaModel m(omgs::TopkForm::linear, 1e-5, 2e-9, {{4, {1e-4, 1e-9}}});
  CHECK(m.pair_bytes() == 8.0);
  // The 320 bytes of the test above at 3.5 bytes per pair: 140.
  const omgs::AlphaBetaModel c = m.with_pair_bytes(3.5);
  CHECK(c.pair_bytes() == 3.5);
  CHECK(c.allgather_s(1000, 4, 0.01) == Approx(1e-4 + 1e-9 * 140.0).epsilon(1e-12));
  CHECK(c.with_topk(omgs::TopkCost{}).pair_bytes() == 3.5);  // kept with another top-k
  // The formula (P not in the table) scales the same way: (P - 1) * k * bytes.
  const auto f = omgs::AlphaBetaModel::from_json(
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 0},
          "allgather": [], "allgather_formula": {"alpha_s": 0, "beta_s_per_byte": 1e-9}})");
  CHECK(f.allgather_s(1000, 3, 0.01) == Approx(1e-9 * 2 * 10 * 8.0).epsilon(1e-12));
  CHECK(f.with_pair_bytes(4.0).allgather_s(1000, 3, 0.01) ==
        Approx(1e-9 * 2 * 10 * 4.0).epsilon(1e-12));
  CHECK_THROWS_WITH(m.with_pair_bytes(0.0), Catch::Contains("bytes per pair"));
  CHECK_THROWS_WITH(m.with_pair_bytes(100.0), Catch::Contains("(0, 64]"));
}
