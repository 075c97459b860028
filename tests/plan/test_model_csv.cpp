#include <cstdio>
#include <sstream>
#include <string>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"

namespace {
std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    omgs::parse_model_csv(in, "m.csv");
  } catch (const omgs::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("model CSV: good files", "[plan][csv]") {
  std::istringstream in(
      "# comment\n\nname,numel,backward_s\r\nconv1.weight, 9408 ,1.5e-3\n# skip\nfc.bias,1000,0\n");
  const auto layers = omgs::parse_model_csv(in, "m.csv");
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].name == "conv1.weight");
  CHECK(layers[0].numel == 9408);
  CHECK(layers[0].backward_s == 1.5e-3);
  CHECK(layers[1].backward_s == 0.0);
}

TEST_CASE("model CSV: errors name the line and field", "[plan][csv]") {
  const std::string h = "name,numel,backward_s\n";
  CHECK(error_of("") == "m.csv: empty file (expected the header 'name,numel,backward_s')");
  CHECK(error_of(h) == "m.csv: no layers after the header");
  CHECK(error_of("name,size,time\n").find("m.csv:1: the header must be") == 0);
  CHECK(error_of(h + "a,1,0\nb,x,0\n") ==
        "m.csv:3: field 'numel': 'x' is not a non-negative integer");
  CHECK(error_of(h + "a,-1,0\n").find("m.csv:2: field 'numel'") == 0);
  CHECK(error_of(h + "a,1.5,0\n").find("m.csv:2: field 'numel'") == 0);
  CHECK(error_of(h + "a,0,0\n").find("m.csv:2: field 'numel': 0") == 0);
  CHECK(error_of(h + "a,99999999999999999999999,0\n").find("too large") != std::string::npos);
  CHECK(error_of(h + "a,1,abc\n") == "m.csv:2: field 'backward_s': 'abc' is not a number");
  CHECK(error_of(h + "a,1,\n") == "m.csv:2: field 'backward_s': '' is not a number");
  CHECK(error_of(h + "a,1,-1\n") == "m.csv:2: field 'backward_s': -1 is negative");
  CHECK(error_of(h + "a,1,inf\n") == "m.csv:2: field 'backward_s': 'inf' is not finite");
  CHECK(error_of(h + "a,1,0\na,2,0\n") == "m.csv:3: field 'name': 'a' already appears on line 2");
  CHECK(error_of(h + "a,1\n") == "m.csv:2: expected 3 fields (name,numel,backward_s), found 2");
  CHECK(error_of(h + "a,1,0,4\n").find("found 4") != std::string::npos);
  CHECK(error_of(h + ",1,0\n") == "m.csv:2: field 'name' is empty");
  CHECK(error_of(h + std::string(2000, 'n') + ",1,0\n").find("longer than 1024") !=
        std::string::npos);
}

TEST_CASE("model CSV: the bundled models load", "[plan][csv]") {
  for (const char* name : {"resnet50", "vgg16", "bert_base", "gpt2_small"}) {
    const auto layers =
        omgs::load_model_csv(std::string(OMGS_SOURCE_DIR "/examples/models/") + name + ".csv");
    CHECK(layers.size() > 30);
  }
  CHECK_THROWS_WITH(omgs::load_model_csv("/nonexistent.csv"), Catch::Contains("cannot open"));
}

TEST_CASE("model CSV: byte order mark, tiny times, the 2^53 element limit (fuzzer finds)",
          "[plan][csv]") {
  {
    std::istringstream in("\xEF\xBB\xBFname,numel,backward_s\na,4,1e-310\n");
    const auto layers = omgs::parse_model_csv(in, "m.csv");
    REQUIRE(layers.size() == 1);
    CHECK(layers[0].backward_s > 0.0);
    CHECK(layers[0].backward_s < 1e-300);
  }
  const std::string h = "name,numel,backward_s\n";
  CHECK(error_of(h + "a,9007199254740993,0\n").find("m.csv:2: field 'numel'") == 0);
  // Four tensors of 2^62 elements made the group sums wrap to 0 before the limit existed.
  CHECK(error_of(h + "a,4611686018427387904,0\nb,4611686018427387904,0\n").find("too large") !=
        std::string::npos);
  // Each within the limit, the sum not: the layer that crosses it is named.
  CHECK(
      error_of(h + "a,9007199254740992,0\nb,1,0\n").find("layer 1 'b' brings the model's total") !=
      std::string::npos);
}

TEST_CASE("save_model_csv writes what load_model_csv reads back, bit for bit", "[plan][csv]") {
  const std::vector<omgs::LayerSpec> layers = {
      {"conv1.weight", 9408, 1.0 / 3.0}, {"fc.bias", 1000, 0.0}, {"x", 1, 4.9e-324}};
  const std::string path = "omgs_test_save_model.csv";
  omgs::save_model_csv(path, layers);
  const auto back = omgs::load_model_csv(path);
  REQUIRE(back.size() == layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    CHECK(back[i].name == layers[i].name);
    CHECK(back[i].numel == layers[i].numel);
    CHECK(back[i].backward_s == layers[i].backward_s);
  }
  std::remove(path.c_str());
  CHECK_THROWS_WITH(omgs::save_model_csv(path, {{"a,b", 1, 0.0}}),
                    Catch::Contains("layer 0 'a,b' has a name the CSV format cannot hold"));
  CHECK_THROWS_WITH(omgs::save_model_csv("/nonexistent-dir/m.csv", layers),
                    Catch::Contains("cannot write"));
}
