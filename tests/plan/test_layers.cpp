#include <cmath>
#include <limits>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"

using omgs::LayerSpec;

namespace {
std::string error_of(const std::vector<LayerSpec>& layers) {
  try {
    omgs::validate_layers(layers);
  } catch (const omgs::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("validate_layers accepts a good list", "[plan][layers]") {
  REQUIRE_NOTHROW(omgs::validate_layers({{"a", 1, 0.0}, {"b", 10, 1e-3}}));
}

TEST_CASE("validate_layers names the bad layer", "[plan][layers]") {
  CHECK(error_of({}).find("empty") != std::string::npos);
  CHECK(error_of({{"a", 1, 0.0}, {"", 3, 0.0}}).find("layer 1 has an empty name") !=
        std::string::npos);
  CHECK(error_of({{"a", 1, 0.0}, {"b", 0, 0.0}}).find("layer 1 'b' has numel 0") !=
        std::string::npos);
  CHECK(error_of({{"a", 1, -1.0}}).find("layer 0 'a' has backward_s") != std::string::npos);
  CHECK(error_of({{"a", 1, std::nan("")}}).find("must be finite") != std::string::npos);
  CHECK(error_of({{"a", 1, std::numeric_limits<double>::infinity()}}).find("finite") !=
        std::string::npos);
  CHECK(error_of({{"a", 1, 0.0}, {"b", 1, 0.0}, {"a", 2, 0.0}})
            .find("layer 2 'a' repeats the name of layer 0") != std::string::npos);
  CHECK(error_of({{std::string(omgs::max_layer_name_bytes + 1, 'x'), 1, 0.0}})
            .find("bytes (at most 1024)") != std::string::npos);
}

TEST_CASE("selected_count is ceil(density * n) without representation artefacts",
          "[plan][layers]") {
  CHECK(omgs::selected_count(0, 0.5) == 0);
  CHECK(omgs::selected_count(100, 0.01) == 1);  // 0.01 * 100 is 1.0000000000000002
  CHECK(omgs::selected_count(1000, 0.001) == 1);
  CHECK(omgs::selected_count(1001, 0.001) == 2);
  CHECK(omgs::selected_count(300, 0.01) == 3);
  CHECK(omgs::selected_count(7, 1.0) == 7);
  CHECK(omgs::selected_count(7, 0.5) == 4);
  CHECK(omgs::selected_count(1, 1e-9) == 1);  // never 0 for a non-empty tensor
  CHECK(omgs::selected_count(25'557'032, 0.001) == 25'558);
}

TEST_CASE("validate_density accepts exactly (0, 1]", "[plan][layers]") {
  CHECK_NOTHROW(omgs::validate_density(1.0));
  CHECK_NOTHROW(omgs::validate_density(1e-6));
  CHECK_THROWS_AS(omgs::validate_density(0.0), omgs::Error);
  CHECK_THROWS_AS(omgs::validate_density(-0.1), omgs::Error);
  CHECK_THROWS_AS(omgs::validate_density(1.0000001), omgs::Error);
  CHECK_THROWS_AS(omgs::validate_density(std::nan("")), omgs::Error);
}

TEST_CASE("validate_layers bounds the total element count (no uint64 wrap-around)",
          "[plan][layers]") {
  const std::uint64_t half = omgs::max_total_numel / 2;
  CHECK_NOTHROW(omgs::validate_layers({{"a", half, 0.0}, {"b", half, 0.0}}));
  CHECK_THROWS_WITH(omgs::validate_layers({{"a", half, 0.0}, {"b", half, 0.0}, {"c", 1, 0.0}}),
                    Catch::Contains("layer 2 'c' brings the model's total numel above 2^53"));
  // The reference model's size product stays exact: allgather time grows with the size.
  omgs::ReferenceModel ref;
  CHECK(ref.allgather_s(omgs::max_total_numel, 16, 0.001) > ref.allgather_s(1, 16, 0.001));
}

TEST_CASE("validate_layers rejects backward times whose sum overflows", "[plan][layers]") {
  CHECK_NOTHROW(omgs::validate_layers({{"a", 1, 1e307}, {"b", 1, 1e307}}));
  CHECK_THROWS_WITH(omgs::validate_layers({{"a", 1, 1e308}, {"b", 1, 1e308}, {"c", 1, 1e308}}),
                    Catch::Contains("layer 1 'b' makes the sum of backward_s overflow"));
}
