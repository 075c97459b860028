// Fuzz target: omgs::parse_model_csv on arbitrary bytes. Only omgs::Error may escape the
// parser. A model that parses must
//  * be valid (validate_layers does not throw): non-empty, unique non-empty names of at most
//    max_layer_name_bytes bytes, 0 < numel <= 2^62, finite backward_s >= 0;
//  * hold names as the parser cuts them: no ',' or '\n', no blank (' ', '\t') at either end,
//    no '\r' at the end, no leading '#';
//  * read back identically from its own CSV form (name,numel,%.17g);
//  * plan without silent uint64 wrap-around (up to 64 layers, reference model, P = 16):
//    every group's numel is the exact sum of its layers' (or make_plan throws omgs::Error
//    when that sum does not fit), and a tensor's allgather time is at least a 1-element
//    tensor's.
// A violation prints a message on stderr and aborts.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include <omgs/plan.hpp>

#define OMGS_FUZZ_TARGET "fuzz_model_csv"
#include "fuzz_support.hpp"

namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool blank(char c) {
  return c == ' ' || c == '\t';
}

void check_layers(const std::vector<omgs::LayerSpec>& layers) {
  try {
    omgs::validate_layers(layers);
  } catch (const omgs::Error& e) {
    omgs_fuzz::fail("validate_layers refuses what parse_model_csv returned", __LINE__, e.what());
  }
  OMGS_FUZZ_REQUIRE(!layers.empty(), "no layers");
  std::unordered_set<std::string> names;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const omgs::LayerSpec& s = layers[l];
    const std::string at = "layer " + std::to_string(l);
    OMGS_FUZZ_REQUIRE(s.numel > 0 && s.numel <= (std::uint64_t{1} << 62),
                      at + ": numel " + std::to_string(s.numel));
    OMGS_FUZZ_REQUIRE(std::isfinite(s.backward_s) && s.backward_s >= 0.0,
                      at + ": backward_s " + num(s.backward_s));
    OMGS_FUZZ_REQUIRE(!s.name.empty() && s.name.size() <= omgs::max_layer_name_bytes,
                      at + ": name of " + std::to_string(s.name.size()) + " bytes");
    OMGS_FUZZ_REQUIRE(s.name.find(',') == std::string::npos, at + ": ',' in the name");
    OMGS_FUZZ_REQUIRE(s.name.find('\n') == std::string::npos, at + ": '\\n' in the name");
    OMGS_FUZZ_REQUIRE(!blank(s.name.front()) && !blank(s.name.back()) && s.name.back() != '\r',
                      at + ": name not trimmed: '" + s.name + "'");
    OMGS_FUZZ_REQUIRE(s.name.front() != '#', at + ": a comment line read as a layer");
    OMGS_FUZZ_REQUIRE(names.insert(s.name).second, at + ": duplicate name '" + s.name + "'");
  }
}

void check_round_trip(const std::vector<omgs::LayerSpec>& layers) {
  std::string csv = "name,numel,backward_s\n";
  for (const omgs::LayerSpec& s : layers)
    csv += s.name + "," + std::to_string(s.numel) + "," + num(s.backward_s) + "\n";
  std::istringstream in(csv);
  std::vector<omgs::LayerSpec> again;
  try {
    again = omgs::parse_model_csv(in, "fuzz-round-trip");
  } catch (const omgs::Error& e) {
    omgs_fuzz::fail("the CSV form of a parsed model does not parse", __LINE__, e.what());
  }
  OMGS_FUZZ_REQUIRE(again.size() == layers.size(), csv);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    OMGS_FUZZ_REQUIRE(again[l].name == layers[l].name && again[l].numel == layers[l].numel &&
                          again[l].backward_s == layers[l].backward_s,
                      "layer " + std::to_string(l) + " changed:\n" + csv);
  }
}

void check_no_wrap(const std::vector<omgs::LayerSpec>& layers) {
  if (layers.size() > 64) return;
  const omgs::ReferenceModel model;
  omgs::PlanConfig config;
  config.workers = 16;
  config.density = 0.001;
  for (omgs::Planner planner : {omgs::Planner::single, omgs::Planner::layerwise, omgs::Planner::mgs,
                                omgs::Planner::optimal}) {
    const std::string name(omgs::to_string(planner));
    omgs::Plan plan;
    try {
      plan = omgs::make_plan(planner, layers, model, config);
    } catch (const omgs::Error& e) {
      // Acceptable only when a group's element count does not fit in 64 bits.
      std::uint64_t total = 0;
      bool overflow = false;
      for (const omgs::LayerSpec& s : layers)
        overflow |= __builtin_add_overflow(total, s.numel, &total);
      OMGS_FUZZ_REQUIRE(overflow, name + ": make_plan throws on a valid model: " + e.what());
      continue;
    }
    for (std::size_t g = 0; g < plan.groups.size(); ++g) {
      const omgs::Group& gr = plan.groups[g];
      OMGS_FUZZ_REQUIRE(gr.begin < gr.end && gr.end <= layers.size(), name);
      std::uint64_t exact = 0;
      bool overflow = false;
      for (std::size_t l = gr.begin; l < gr.end; ++l)
        overflow |= __builtin_add_overflow(exact, layers[l].numel, &exact);
      OMGS_FUZZ_REQUIRE(!overflow && gr.numel == exact,
                        name + ", group " + std::to_string(g) + " (layers " +
                            std::to_string(gr.begin) + ".." + std::to_string(gr.end - 1) +
                            "): numel " + std::to_string(gr.numel) +
                            (overflow ? ", but the exact sum exceeds 2^64 (wrapped silently)"
                                      : ", exact sum " + std::to_string(exact)));
    }
  }
  // Each tensor's own allgather (size = numel * P * 4 * density bytes): the reference model
  // is cheapest for 1 element, since its large-message times at 1 MiB exceed every
  // small-message alpha.
  const double one = model.allgather_s(1, config.workers, config.density);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const double t = model.allgather_s(layers[l].numel, config.workers, config.density);
    OMGS_FUZZ_REQUIRE(t >= one, "layer " + std::to_string(l) + ": numel " +
                                    std::to_string(layers[l].numel) +
                                    ": reference allgather_s(numel, 16, 0.001) = " + num(t) +
                                    " < allgather_s(1, 16, 0.001) = " + num(one));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<omgs::LayerSpec> layers;
  try {
    layers = omgs::parse_model_csv(in, "fuzz");
  } catch (const omgs::Error&) {
    return 0;
  }
  check_layers(layers);
  check_round_trip(layers);
  check_no_wrap(layers);
  return 0;
}
