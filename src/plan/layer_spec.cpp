#include <cmath>
#include <string>
#include <unordered_map>

#include <omgs/plan.hpp>

namespace omgs {

namespace {
std::string layer_label(const std::vector<LayerSpec>& layers, std::size_t i) {
  std::string label = "layer " + std::to_string(i);
  if (!layers[i].name.empty() && layers[i].name.size() <= 128) label += " '" + layers[i].name + "'";
  return label;
}
}  // namespace

void validate_layers(const std::vector<LayerSpec>& layers) {
  if (layers.empty())
    throw Error("omgs: the layer list is empty (at least one gradient tensor is needed)");
  std::unordered_map<std::string, std::size_t> seen;
  seen.reserve(layers.size());
  std::uint64_t total = 0;
  double backward = 0.0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    if (l.name.empty()) throw Error("omgs: " + layer_label(layers, i) + " has an empty name");
    if (l.name.size() > max_layer_name_bytes)
      throw Error("omgs: " + layer_label(layers, i) + " has a name of " +
                  std::to_string(l.name.size()) + " bytes (at most " +
                  std::to_string(max_layer_name_bytes) + ")");
    if (l.numel == 0) throw Error("omgs: " + layer_label(layers, i) + " has numel 0 (must be > 0)");
    // Every sum of numel (groups, the model) then fits uint64 and converts to double exactly.
    if (l.numel > max_total_numel - total)
      throw Error("omgs: " + layer_label(layers, i) +
                  " brings the model's total numel above 2^53 = " +
                  std::to_string(max_total_numel) + " elements");
    total += l.numel;
    if (!std::isfinite(l.backward_s) || l.backward_s < 0.0)
      throw Error("omgs: " + layer_label(layers, i) + " has backward_s " +
                  std::to_string(l.backward_s) + " (must be finite and >= 0)");
    backward += l.backward_s;
    if (!std::isfinite(backward))
      throw Error("omgs: " + layer_label(layers, i) +
                  " makes the sum of backward_s overflow (the total must be finite)");
    auto [it, inserted] = seen.emplace(l.name, i);
    if (!inserted)
      throw Error("omgs: " + layer_label(layers, i) + " repeats the name of layer " +
                  std::to_string(it->second) + " (names must be unique)");
  }
}

void validate_density(double density) {
  if (!(density > 0.0 && density <= 1.0))
    throw Error("omgs: density " + std::to_string(density) + " is outside (0, 1]");
}

std::uint64_t selected_count(std::uint64_t numel, double density) {
  if (numel == 0) return 0;
  const double x = density * static_cast<double>(numel);
  double k = std::ceil(x * (1.0 - 1e-12));
  if (!(k >= 1.0)) k = 1.0;  // also catches NaN
  if (k >= static_cast<double>(numel)) return numel;
  return static_cast<std::uint64_t>(k);
}

}  // namespace omgs
