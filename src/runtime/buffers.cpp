// The runtime's buffers: size checks before allocating, the flat per-element buffers, the
// per-group offsets, pairs and selector (rebuilt after profiling), the engine wired to them.
#include <unistd.h>

#include <algorithm>
#include <type_traits>

#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/exchange_kernels.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// Before anything is allocated: every group must fit 32-bit indices, and on host
/// back-ends the buffers must fit this node's physical memory (a clear error instead of
/// an allocation failure or the OOM killer). Throws omgs::Error naming the group / sizes.
void RuntimeImpl::check_sizes() const {
  std::uint64_t total = 0, pairs = 0, max_n = 0;
  for (const LayerSpec& l : layers) total += l.numel;  // <= 2^53 (validate_layers)
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& gr = plan.groups[g];
    if (gr.numel > Selector::max_supported_n)
      throw Error("omgs: " + group_label(g) + " has " + std::to_string(gr.numel) +
                  " elements, more than 32-bit indices address (" +
                  std::to_string(Selector::max_supported_n) +
                  "); use a planner that makes smaller groups (threshold, layerwise)");
    pairs += selected_count(gr.numel, options.density) * (1 + static_cast<std::uint64_t>(size));
    max_n = std::max<std::uint64_t>(max_n, gr.numel);
  }
  // gradient + residual (two buffers) + aggregated, the pairs, the selector's candidate
  // buffers.
  const double bytes = 16.0 * static_cast<double>(total) + 8.0 * static_cast<double>(pairs) +
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
    grad = GradientView("omgs::gradient", total);
    resid = GradientView("omgs::residual", total);
    resid_alt = GradientView("omgs::residual_alt", total);
    agg = GradientView("omgs::aggregated", total);
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the gradient, residual (2) and aggregated buffers (4 x " +
                std::to_string(total) + " floats = " + std::to_string(4 * total * 4) +
                " bytes) failed: " + e.what());
  }
  is_ready.assign(L, 0);
  layer_ready_s.assign(L, nan_s);
  layer_bwd_s.assign(L, nan_s);
  bwd_sum.assign(L, 0.0);
  bwd_count.assign(L, 0);
}

/// Everything that depends on the plan: per-group offsets, send / receive pairs, the
/// selector. Called at construction and once more after profiling.
void RuntimeImpl::allocate_groups() {
  gather_residual();  // before the old plan's group ranges are dropped
  const std::size_t G = plan.groups.size();
  group_offset.clear();
  group_numel.clear();
  group_k.clear();
  send_offset.clear();
  recv_offset.clear();
  std::size_t max_n = 1, max_k = 1, send_total = 0, recv_total = 0;
  for (std::size_t g = 0; g < G; ++g) {
    const Group& gr = plan.groups[g];
    group_offset.push_back(layer_offset[gr.begin]);
    group_numel.push_back(gr.numel);
    // A dense group selects nothing: no pairs, the allreduce works on grad and agg.
    group_k.push_back(
        gr.collective == Collective::dense ? 0 : selected_count(gr.numel, options.density));
    send_offset.push_back(send_total);
    recv_offset.push_back(recv_total);
    send_total += group_k.back();
    recv_total += group_k.back() * static_cast<std::size_t>(size);
    max_n = std::max<std::size_t>(max_n, gr.numel);
    max_k = std::max(max_k, group_k.back());
  }
  try {
    sel_index = Kokkos::View<std::uint32_t*, DeviceMemory>("omgs::selected_index", max_k);
    sel_value = Kokkos::View<float*, DeviceMemory>("omgs::selected_value", max_k);
    send = PairView("omgs::send_pairs", send_total);
    recv = PairView("omgs::recv_pairs", recv_total);
    if (bad_blocks.extent(0) == 0) {
      bad_blocks = Kokkos::View<int*, DeviceMemory>("omgs::bad_blocks", 1);
      bad_blocks_host = Kokkos::create_mirror_view(bad_blocks);
    }
    selector = std::make_unique<Selector>(max_n, max_k);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the send / receive buffers (" + std::to_string(send_total) +
                " + " + std::to_string(recv_total) +
                " pairs of 8 bytes) and the top-k work "
                "buffers failed: " +
                e.what());
  }
  failed_here.assign(G, 0);
  group_done.assign(G, 0);
  resid_swapped.assign(G, 0);
  topk_start_s.assign(G, nan_s);
  topk_end_s.assign(G, nan_s);
  agg_start_s.assign(G, nan_s);
  agg_end_s.assign(G, nan_s);
  measured = Timeline{};
  measured.groups.resize(G);
  reset_remaining();
}

void RuntimeImpl::start_engine() {
  std::vector<GroupBuffers> buffers;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    GroupBuffers b;
    b.send = send.data() + send_offset[g];
    b.recv = recv.data() + recv_offset[g];
    b.k = group_k[g];
    if (is_dense(g)) {
      b.dense_send = grad.data() + group_offset[g];
      b.dense_recv = agg.data() + group_offset[g];
      b.dense_numel = group_numel[g];
    }
    buffers.push_back(b);
  }
  ProgressOptions po;
  po.force_inline = options.force_inline_progress;
  po.pin = options.progress_pin;
  po.gpu_aware = options.gpu_aware;
  po.wait_timeout_s = options.wait_timeout_s;
  po.shutdown_timeout_s = options.shutdown_timeout_s;
  po.read_environment = false;  // the runtime applied (and checked) the environment
  // The host back-end's threads (OpenMP) per rank: the pin and the oversubscription
  // warning count them (docs/openmp.md).
  po.compute_threads = Kokkos::DefaultHostExecutionSpace().concurrency();
  if (!std::is_same<DeviceMemory, Kokkos::HostSpace>::value) {
    po.buffer_space = MemorySpace::device;
    po.copy_to_host = kernels::copy_to_host;
    po.copy_to_device = kernels::copy_to_device;
  }
  engine = std::make_unique<ProgressEngine>(comm, std::move(buffers), po);
}

/// Layer l's slot of one of the flat buffers; throws naming the accessor if l is unknown.
GradientView RuntimeImpl::layer_slice(const GradientView& flat, std::size_t l,
                                      const char* accessor) const {
  if (l >= layers.size())
    throw Error(std::string("omgs::Runtime::") + accessor + ": layer " + std::to_string(l) +
                " does not exist (" + std::to_string(layers.size()) + " layers)");
  return Kokkos::subview(flat, std::make_pair(layer_offset[l], layer_offset[l + 1]));
}

/// Moves every group's residual that lives in resid_alt back to resid (a new plan groups
/// the layers differently; each new group's residual must be in one buffer). Only when the
/// plan changes; allocates nothing.
void RuntimeImpl::gather_residual() {
  bool copied = false;
  for (std::size_t g = 0; g < resid_swapped.size(); ++g) {
    if (!resid_swapped[g]) continue;
    Kokkos::deep_copy(exec(), Kokkos::subview(resid, group_range(g)),
                      Kokkos::subview(resid_alt, group_range(g)));
    resid_swapped[g] = 0;
    copied = true;
  }
  if (copied) detail::fence(exec());
}

/// Every group waits for all of its layers again.
void RuntimeImpl::reset_remaining() {
  remaining.resize(plan.groups.size());
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    remaining[g] = plan.groups[g].end - plan.groups[g].begin;
}

/// "group 3 (layers 'fc.bias' .. 'fc.weight')" for messages: backward order.
std::string RuntimeImpl::group_label(std::size_t g) const {
  const Group& gr = plan.groups[g];
  return "group " + std::to_string(g) + " (layers '" + layers[gr.end - 1].name + "' .. '" +
         layers[gr.begin].name + "')";
}

/// The elements of group g in one of the flat per-element buffers.
std::pair<std::size_t, std::size_t> RuntimeImpl::group_range(std::size_t g) const {
  return {group_offset[g], group_offset[g] + group_numel[g]};
}

/// Group g is not applied this iteration on this rank: its aggregated slot is zero and
/// this rank's selection goes back into its residual, so no gradient mass is lost.
void RuntimeImpl::skip_group(std::size_t g) {
  restore_own_selection(g);
  fill_zero(exec(), Kokkos::subview(agg, group_range(g)));
}

void RuntimeImpl::restore_own_selection(std::size_t g) {
  if (failed_here[g]) return;  // select left this rank's residual untouched
  kernels::add_back(exec(), send, send_offset[g], group_k[g], resid_of(g), group_offset[g]);
}

}  // namespace omgs::detail
