// Clipping and momentum correction around a group's selection (RuntimeOptions::clip_norm,
// ::momentum; docs/api.md "Accuracy at low density"). Before the group's exchange prepares
// it, each layer's gradient g is clipped to clip_norm / sqrt(P) and turned into this
// iteration's velocity u_t = m u_{t-1} + g in the gradient slot, so the exchange sends (dense
// groups) or accumulates into the residual (sparse groups) u_t, not g. After the selection
// u_t becomes the velocity, cleared where the residual was sent (momentum factor masking),
// so an entry that was applied starts its momentum again, as the residual does.
#include <cmath>

#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/dgc_kernels.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// Construction: the velocity and the layer offsets on the device, only when used.
void RuntimeImpl::allocate_prep() {
  if (options.momentum <= 0 && options.clip_norm <= 0) return;
  const std::size_t total = layer_offset.back();
  try {
    if (options.momentum > 0) flat_.velocity = GradientView("omgs::velocity", total);
    layer_offset_dev = kernels::OffsetView("omgs::layer_offset", layer_offset.size());
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the momentum correction's velocity (" + std::to_string(total) +
                " floats) failed: " + e.what());
  }
  auto host = Kokkos::create_mirror_view(layer_offset_dev);
  for (std::size_t i = 0; i < layer_offset.size(); ++i) host(i) = layer_offset[i];
  Kokkos::deep_copy(layer_offset_dev, host);
}

/// ready(), group g complete: clip its layers and add the momentum, in its gradient slot.
void RuntimeImpl::prepare_gradient(std::size_t g) {
  if (layer_offset_dev.extent(0) == 0) return;  // neither option is on
  const Group& gr = plan().groups[g];
  const float clip =
      options.clip_norm > 0 ? static_cast<float>(options.clip_norm / std::sqrt(size)) : 0.0f;
  kernels::clip_and_accumulate(instance_->ctx.exec(), flat_.grad, flat_.velocity, layer_offset_dev,
                               gr.begin, gr.end, clip, static_cast<float>(options.momentum));
}

/// After group g's exchange prepared it: u_t is the velocity, cleared at the entries sent.
/// A selection that failed (non-finite values) left the residual as it was: so does this.
void RuntimeImpl::commit_momentum(std::size_t g) {
  if (flat_.velocity.extent(0) == 0) return;
  const GroupExchange& ex = *instance_->exchanges[g];
  if (!ex.contributed()) return;
  const ExecSpace& exec = instance_->ctx.exec();
  const GroupSlice& s = ex.slice();
  kernels::store_velocity(exec, flat_.velocity, flat_.grad, s.offset, s.numel);
  if (ex.k() > 0)
    kernels::mask_sent(exec, flat_.velocity, s.offset, instance_->ctx.sel_index, ex.k());
}

}  // namespace omgs::detail
