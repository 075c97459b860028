// The runtime's buffers: size checks before allocating, the flat per-element buffers
// (allocated once), layer slices and group names. What depends on the plan is in
// plan_instance.cpp.
#include <unistd.h>

#include <algorithm>
#include <type_traits>

#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// Before anything is allocated: every group must fit 32-bit indices, and on host
/// back-ends the buffers must fit this node's physical memory (a clear error instead of
/// an allocation failure or the OOM killer). Throws omgs::Error naming the group / sizes.
std::vector<std::uint64_t> RuntimeImpl::group_bytes(const Plan& plan) const {
  std::vector<std::uint64_t> bytes;
  bytes.reserve(plan.groups.size());
  for (const Group& gr : plan.groups) {
    const std::uint64_t k = selected_count(gr.numel, density_now);
    bytes.push_back(8 * exchange_footprint(gr.collective, gr.numel, k,
                                           static_cast<std::uint64_t>(size),
                                           {options.pair_wire, dense_wire()}));
  }
  return bytes;
}

void RuntimeImpl::check_sizes(const Plan& plan) const {
  std::uint64_t total = 0, pairs = 0, max_n = 0;
  for (const LayerSpec& l : layers) total += l.numel;  // <= 2^53 (validate_layers)
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& gr = plan.groups[g];
    if (gr.numel > ExchangeContext::Selector::max_supported_n)
      throw Error("omgs: " + group_label(plan, g) + " has " + std::to_string(gr.numel) +
                  " elements, more than 32-bit indices address (" +
                  std::to_string(ExchangeContext::Selector::max_supported_n) +
                  "); use a planner that makes smaller groups (threshold, layerwise)");
    const std::uint64_t k = selected_count(gr.numel, density_now);
    pairs += exchange_footprint(gr.collective, gr.numel, k, static_cast<std::uint64_t>(size),
                                {options.pair_wire, dense_wire()});
    max_n = std::max<std::uint64_t>(max_n, gr.numel);
  }
  // gradient + residual (two buffers) + aggregated (+ velocity; + a 16-bit gradient type's
  // gradient and aggregated buffers), the exchanges' 8-byte items, the selector's candidate
  // buffers.
  const double per_element = (options.momentum > 0 ? 20.0 : 16.0) +
                             (options.gradient_type != GradientType::fp32 ? 4.0 : 0.0);
  const double bytes = per_element * static_cast<double>(total) + 8.0 * static_cast<double>(pairs) +
                       16.0 * static_cast<double>(std::max<std::uint64_t>(max_n / 8, 16384));
  if (std::is_same<DeviceMemory, Kokkos::HostSpace>::value) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double physical = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
    // Every rank of the communicator on this node holds the same buffers.
    const double node_bytes = bytes * node_ranks;
    if (physical > 0 && node_bytes > physical)
      throw Error("omgs: the runtime's buffers for " + std::to_string(total) +
                  " gradient elements need " + std::to_string(bytes / 1e9) + " GB per rank, " +
                  std::to_string(node_bytes / 1e9) + " GB for the " + std::to_string(node_ranks) +
                  " ranks on this node: more than its physical memory (" +
                  std::to_string(physical / 1e9) + " GB)");
  }
}

void RuntimeImpl::allocate_layers() {
  const std::size_t L = layers.size();
  layer_offset.assign(L + 1, 0);
  for (std::size_t l = 0; l < L; ++l) layer_offset[l + 1] = layer_offset[l] + layers[l].numel;
  const std::size_t total = layer_offset[L];
  try {
    flat_.grad = GradientView("omgs::gradient", total);
    flat_.resid = GradientView("omgs::residual", total);
    flat_.resid_alt = GradientView("omgs::residual_alt", total);
    flat_.agg = GradientView("omgs::aggregated", total);
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the gradient, residual (2) and aggregated buffers (4 x " +
                std::to_string(total) + " floats = " + std::to_string(4 * total * 4) +
                " bytes) failed: " + e.what());
  }
  is_ready.assign(L, 0);
}

/// Layer l's slot of one of the flat buffers; throws naming the accessor if l is unknown.
GradientView RuntimeImpl::layer_slice(const GradientView& flat, std::size_t l,
                                      const char* accessor) const {
  if (l >= layers.size())
    throw Error(std::string("omgs::Runtime::") + accessor + ": layer " + std::to_string(l) +
                " does not exist (" + std::to_string(layers.size()) + " layers)");
  return Kokkos::subview(flat, std::make_pair(layer_offset[l], layer_offset[l + 1]));
}

/// "group 3 (layers 'fc.bias' .. 'fc.weight')" for messages: backward order.
std::string RuntimeImpl::group_label(const Plan& plan, std::size_t g) const {
  const Group& gr = plan.groups[g];
  return "group " + std::to_string(g) + " (layers '" + layers[gr.end - 1].name + "' .. '" +
         layers[gr.begin].name + "')";
}

}  // namespace omgs::detail
