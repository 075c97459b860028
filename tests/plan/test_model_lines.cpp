// The model's lines by collective name (issue 44): collective_s / knows_collective equal the
// built-in collectives' virtuals bit for bit, lines round-trip through JSON, an unknown name
// is a clear error, and a collective registered by the test gets a line from JSON.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"
#include "plan/collective_costs.hpp"

namespace {
// A test-only collective: P - 1 point-to-point messages of the k pairs (table: the P k
// pairs' bytes; formula: the (P - 1) k pairs sent).
double p2p_table_bytes(std::uint64_t numel, int workers, double density,
                       const omgs::detail::LineFormat& f) {
  return static_cast<double>(workers) * static_cast<double>(omgs::selected_count(numel, density)) *
         f.pair_bytes;
}
double p2p_formula_bytes(std::uint64_t numel, int workers, double density,
                         const omgs::detail::LineFormat& f) {
  return (static_cast<double>(workers) - 1.0) *
         static_cast<double>(omgs::selected_count(numel, density)) * f.pair_bytes;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

omgs::AlphaBetaModel all_lines() {
  omgs::CollectiveCosts ag, ar;
  ag.table[4] = {1e-4, 1e-9};
  ag.has_formula = ar.has_formula = true;
  ag.formula = {1e-6, 2e-5, 3e-7, 8e-10};
  ar.table[2] = {5e-5, 2e-10};
  ar.formula = {2e-6, 4e-5, 0.0, 8e-10};
  return omgs::AlphaBetaModel(omgs::TopkForm::linear, 1e-5, 2e-9, ag, ar);
}
}  // namespace

TEST_CASE("model lines: collective_s by name equals the virtuals bit for bit",
          "[plan][perf][lines]") {
  omgs::CollectiveCosts sar;
  sar.table[8] = {3e-4, 5e-10};
  const omgs::AlphaBetaModel plain = all_lines();
  const omgs::AlphaBetaModel given = plain.with_sparse_allreduce(sar).with_pair_bytes(3.9);
  const omgs::ReferenceModel ref;
  for (const omgs::PerfModel* m :
       {static_cast<const omgs::PerfModel*>(&plain), static_cast<const omgs::PerfModel*>(&given),
        static_cast<const omgs::PerfModel*>(&ref)}) {
    for (int p : {0, 1, 2, 3, 4, 8, 16, 64}) {
      CHECK(m->knows_collective("allreduce", p) == m->knows_allreduce(p));
      CHECK(m->knows_collective("sparse_allreduce", p) == m->knows_sparse_allreduce(p));
      CHECK_FALSE(m->knows_collective("no_such_collective", p));
      for (std::uint64_t n :
           {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{12345}, std::uint64_t{1} << 30}) {
        if (m->knows_collective("allgather", p))
          CHECK(m->collective_s("allgather", n, p, 0.01) == m->allgather_s(n, p, 0.01));
        if (m->knows_allreduce(p))
          CHECK(m->collective_s("allreduce", n, p, 0.01) == m->allreduce_s(n, p));
        if (m->knows_sparse_allreduce(p))
          CHECK(m->collective_s("sparse_allreduce", n, p, 0.01) ==
                m->sparse_allreduce_s(n, p, 0.01));
      }
    }
  }
  // By hand: the allreduce's table (4 n bytes), the derived sparse allreduce's formula.
  CHECK(plain.collective_s("allreduce", 1000, 2, 0.5) == 5e-5 + 2e-10 * 4000.0);
  CHECK(plain.collective_s("sparse_allreduce", 1000, 8, 0.01) ==
        (2e-6 + 2 * 1e-6) + 4e-5 * 3.0 + (2 * 3e-7 + 2e-5) * 7.0 +
            8e-10 * omgs::AlphaBetaModel::sparse_allreduce_bytes(1000, 8, 0.01));
  CHECK(given.collective_s("sparse_allreduce", 1000, 8, 0.01) ==
        3e-4 + 5e-10 * omgs::AlphaBetaModel::sparse_allreduce_bytes(1000, 8, 0.01, 3.9));
  // The reference model knows the allgather of its cluster only.
  CHECK(ref.knows_collective("allgather", 16));
  CHECK_FALSE(ref.knows_collective("allgather", 3));
  CHECK_FALSE(ref.knows_collective("allreduce", 16));
}

TEST_CASE("model lines: an unknown name or P is an error naming model, collective and P",
          "[plan][perf][lines]") {
  const omgs::AlphaBetaModel m = all_lines();
  CHECK_THROWS_WITH(m.collective_s("ring_allgather", 10, 4, 0.01),
                    Catch::Contains("knows no collective named \"ring_allgather\"") &&
                        Catch::Contains("P = 4") && Catch::Contains("alpha-beta"));
  CHECK_THROWS_WITH(omgs::ReferenceModel().collective_s("ring_allgather", 10, 4, 0.01),
                    Catch::Contains("knows no collective named \"ring_allgather\"") &&
                        Catch::Contains("reference"));
  const omgs::AlphaBetaModel t(omgs::TopkForm::linear, 0.0, 1e-9, {{4, {1e-4, 1e-9}}});
  CHECK_THROWS_WITH(t.collective_s("allgather", 10, 2, 0.01),
                    Catch::Contains("no allgather cost for P = 2"));
  CHECK_THROWS_WITH(t.collective_s("allreduce", 10, 4, 0.01),
                    Catch::Contains("no dense allreduce cost for P = 4"));
  CHECK(t.collective_s("allreduce", 0, 4, 0.01) == 0.0);  // as allreduce_s(0, P)
  CHECK_THROWS_WITH(t.with_line("ring_allgather", {}), Catch::Contains("\"ring_allgather\""));
  CHECK(t.line("allreduce") == nullptr);
  REQUIRE(t.line("allgather") != nullptr);
  CHECK(t.line("allgather")->table.at(4).alpha_s == 1e-4);
}

TEST_CASE("model lines: with_line checks as the JSON does, and removes an empty line",
          "[plan][perf][lines]") {
  const omgs::AlphaBetaModel m = all_lines();
  omgs::CollectiveCosts bad;
  bad.table[4] = {-1.0, 0.0};
  CHECK_THROWS_WITH(m.with_line("sparse_allreduce", bad),
                    Catch::Contains("sparse_allreduce entry for workers 4: alpha_s = -1"));
  CHECK_THROWS_WITH(m.with_line("allgather", {}), Catch::Contains("allgather table is empty"));
  const omgs::AlphaBetaModel no_ar = m.with_line("allreduce", {});
  CHECK(no_ar.line("allreduce") == nullptr);
  CHECK_FALSE(no_ar.knows_allreduce(2));
  CHECK_FALSE(no_ar.knows_sparse_allreduce(8));  // nothing to derive it from
  omgs::CollectiveCosts ag;
  ag.table[2] = {1e-5, 1e-10};
  const omgs::AlphaBetaModel other = m.with_line("allgather", ag);
  CHECK(other.allgather_s(100, 2, 0.1) == 1e-5 + 1e-10 * 2 * 10 * 8.0);
  CHECK_FALSE(other.knows_collective("allgather", 4));
}

TEST_CASE("model lines: every line round-trips through JSON, the examples unchanged",
          "[plan][perf][lines][json]") {
  omgs::CollectiveCosts sar;
  sar.table[8] = {3e-4, 5e-10};
  sar.has_formula = true;
  sar.formula = {1e-4, 1e-5, 1e-6, 5e-10};
  const omgs::AlphaBetaModel m = all_lines().with_sparse_allreduce(sar);
  const omgs::AlphaBetaModel back = omgs::AlphaBetaModel::from_json(m.to_json());
  CHECK(back.to_json() == m.to_json());
  REQUIRE(back.lines().size() == 3);
  CHECK(back.lines().begin()->first == "allgather");          // by name
  CHECK(all_lines().lines().count("sparse_allreduce") == 0);  // derived, not given
  for (const char* name : {"allgather", "allreduce", "sparse_allreduce"}) {
    INFO(name);
    REQUIRE(back.line(name) != nullptr);
    CHECK(back.line(name)->table.size() == m.line(name)->table.size());
    CHECK(back.line(name)->formula.alpha_p_s == m.line(name)->formula.alpha_p_s);
    CHECK(back.collective_s(name, 5000, 8, 0.01) == m.collective_s(name, 5000, 8, 0.01));
  }
  // The shipped fabrics load and write the members they had, in their order.
  for (const char* fabric : {"ethernet_10g", "infiniband_hdr200", "slingshot11"}) {
    const std::string path = std::string(OMGS_SOURCE_DIR) + "/examples/perf/" + fabric + ".json";
    const omgs::AlphaBetaModel f = omgs::AlphaBetaModel::load(path);
    CHECK(omgs::AlphaBetaModel::from_json(f.to_json()).to_json() == f.to_json());
    CHECK(f.line("allreduce") != nullptr);
    CHECK(read(path).find("\"allreduce_formula\"") != std::string::npos);
  }
}

TEST_CASE("model lines: a collective registered by the test gets a line from JSON",
          "[plan][perf][lines][json]") {
  omgs::detail::register_line_bytes("p2p_allgather", p2p_table_bytes, p2p_formula_bytes);
  // Again with the same functions: nothing; with others or a bad name: an error.
  CHECK_NOTHROW(
      omgs::detail::register_line_bytes("p2p_allgather", p2p_table_bytes, p2p_formula_bytes));
  CHECK_THROWS_WITH(
      omgs::detail::register_line_bytes("p2p_allgather", p2p_formula_bytes, p2p_table_bytes),
      Catch::Contains("registered already"));
  CHECK_THROWS_AS(
      omgs::detail::register_line_bytes("x_formula", p2p_table_bytes, p2p_formula_bytes),
      omgs::Error);
  CHECK_THROWS_AS(omgs::detail::register_line_bytes("Bad Name", p2p_table_bytes, p2p_formula_bytes),
                  omgs::Error);
  CHECK_THROWS_AS(omgs::detail::register_line_bytes("topk", p2p_table_bytes, p2p_formula_bytes),
                  omgs::Error);

  const std::string doc = R"({"type": "alpha_beta",
    "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
    "allgather": [{"workers": 4, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9}],
    "p2p_allgather": [{"workers": 4, "alpha_s": 2e-4, "beta_s_per_byte": 2e-9}],
    "p2p_allgather_formula": {"alpha_s": 1e-5, "alpha_p_s": 3e-6, "beta_s_per_byte": 3e-9}})";
  const omgs::AlphaBetaModel m = omgs::AlphaBetaModel::from_json(doc, "p2p.json");
  REQUIRE(m.line("p2p_allgather") != nullptr);
  CHECK(m.knows_collective("p2p_allgather", 4));
  CHECK(m.knows_collective("p2p_allgather", 7));  // the formula
  // k = 10 of 1000: the table's 4 * 10 * 8 bytes, the formula's 6 * 10 * 8.
  CHECK(m.collective_s("p2p_allgather", 1000, 4, 0.01) == 2e-4 + 2e-9 * 320.0);
  CHECK(m.collective_s("p2p_allgather", 1000, 7, 0.01) ==
        1e-5 + 0.0 * std::log2(7.0) + 3e-6 * 6.0 + 3e-9 * 480.0);
  // Written after the built-in lines, and read back the same.
  const std::string json = m.to_json();
  CHECK(json.find("\"p2p_allgather_formula\"") > json.find("\"allgather\""));
  CHECK(omgs::AlphaBetaModel::from_json(json).to_json() == json);
  CHECK(m.describe().find("p2p_allgather P=4") != std::string::npos);
  // Its JSON is checked as the built-ins' is.
  CHECK_THROWS_WITH(omgs::AlphaBetaModel::from_json(R"({"type": "alpha_beta",
        "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
        "allgather": [{"workers": 4, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9}],
        "p2p_allgather_formula": {"alpha_s": -1, "beta_s_per_byte": 0}})",
                                                    "p2p.json"),
                    Catch::Contains("p2p.json") && Catch::Contains("alpha_s = -1"));
  // A model without the line: a clear error naming the collective.
  CHECK_THROWS_WITH(all_lines().collective_s("p2p_allgather", 10, 4, 0.01),
                    Catch::Contains("no p2p allgather cost for P = 4") &&
                        Catch::Contains("\"p2p_allgather_formula\""));
}

TEST_CASE("model lines: line_at is the table's entry for P, else the formula at P",
          "[plan][perf][lines]") {
  const omgs::AlphaBetaModel m = all_lines();
  const auto table = m.line_at("allgather", 4);
  REQUIRE(table.has_value());
  CHECK(table->alpha_s == 1e-4);
  CHECK(table->beta_s_per_byte == 1e-9);
  const auto formula = m.line_at("allgather", 8);  // 1e-6 + 2e-5 log2(8) + 3e-7 (8 - 1)
  REQUIRE(formula.has_value());
  CHECK(formula->alpha_s == Approx(1e-6 + 2e-5 * 3.0 + 3e-7 * 7.0).epsilon(1e-12));
  CHECK(formula->beta_s_per_byte == 8e-10);
  // The sparse allreduce's derived formula (docs/planner.md, "The third exchange").
  const auto derived = m.line_at("sparse_allreduce", 8);
  REQUIRE(derived.has_value());
  CHECK(derived->alpha_s ==
        Approx(2e-6 + 2 * 1e-6 + 4e-5 * 3.0 + (2 * 3e-7 + 2e-5) * 7.0).epsilon(1e-12));
  CHECK_FALSE(m.with_line("allreduce", {}).line_at("sparse_allreduce", 8).has_value());
  CHECK_FALSE(m.line_at("no_such_line", 4).has_value());
}

TEST_CASE("model lines: from_lines builds the model its lines give, refusing what with_line does",
          "[plan][perf][lines]") {
  const omgs::AlphaBetaModel m = all_lines();
  std::map<std::string, omgs::CollectiveCosts, std::less<>> lines = m.lines();
  const omgs::AlphaBetaModel same =
      omgs::AlphaBetaModel::from_lines(omgs::TopkForm::linear, 1e-5, 2e-9, lines);
  for (int p : {2, 4, 8, 64})
    for (const char* name : {"allgather", "allreduce", "sparse_allreduce"})
      CHECK(same.collective_s(name, 100000, p, 0.01) == m.collective_s(name, 100000, p, 0.01));
  CHECK(omgs::AlphaBetaModel::requires_line("allgather"));
  CHECK_FALSE(omgs::AlphaBetaModel::requires_line("allreduce"));
  lines.erase("allgather");
  CHECK_THROWS_WITH(omgs::AlphaBetaModel::from_lines(omgs::TopkForm::linear, 0, 0, lines),
                    Catch::Contains("allgather table is empty"));
  lines = m.lines();
  lines["no_such_line"] = lines["allgather"];
  CHECK_THROWS_WITH(omgs::AlphaBetaModel::from_lines(omgs::TopkForm::linear, 0, 0, lines),
                    Catch::Contains("no collective named \"no_such_line\""));
}
