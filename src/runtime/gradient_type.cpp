// 16-bit gradients (RuntimeOptions::gradient_type; docs/api.md, "16-bit gradients"). The
// user's bf16 / fp16 gradient lives in grad16; when a group is ready it is widened (exactly)
// into the fp32 gradient slot, from where clipping, momentum, the residual and every exchange
// run as for fp32 gradients; when the group is applied, its fp32 aggregate is rounded into
// agg16. The conversions work on the bits (detail/pair_format_values.hpp) whatever
// omgs::bf16_t / fp16_t are, so every back-end rounds alike. The fp32 type takes none of
// these steps.
#include <type_traits>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/pair_format_values.hpp>

#include "runtime/runtime_impl.hpp"

namespace omgs {

std::string_view to_string(GradientType type) {
  switch (type) {
    case GradientType::fp32:
      return "fp32";
    case GradientType::bf16:
      return "bf16";
    case GradientType::fp16:
      return "fp16";
  }
  return "unknown";
}

GradientType parse_gradient_type(std::string_view name) {
  for (GradientType t : {GradientType::fp32, GradientType::bf16, GradientType::fp16})
    if (name == to_string(t)) return t;
  throw Error("omgs: unknown gradient_type '" + std::string(name) +
              "' (expected fp32, bf16 or fp16)");
}

namespace detail {

namespace {

using Bits = Kokkos::View<std::uint16_t*, DeviceMemory>;

/// One pass over a group's elements: Widening, the 16-bit bits into fp32 (exact); else the
/// fp32 values rounded into the bits.
template <bool Widening, bool Brain>
struct Convert {
  Bits bits;
  GradientView fp32;
  std::int64_t offset;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t j = offset + i;
    if (Widening)
      fp32(j) = Brain ? pairs::from_bf16(bits(j)) : pairs::from_fp16(bits(j));
    else
      bits(j) = Brain ? pairs::to_bf16(fp32(j)) : pairs::to_fp16(fp32(j));
  }
};

template <bool Widening>
void convert(const ExecSpace& exec, GradientType type, const Bits& bits, const GradientView& fp32,
             const GroupSlice& s, const std::string& bf16_label, const std::string& fp16_label) {
  const auto policy = range_policy(exec, 0, static_cast<std::int64_t>(s.numel));
  const auto off = static_cast<std::int64_t>(s.offset);
  if (type == GradientType::bf16)
    Kokkos::parallel_for(bf16_label, policy, Convert<Widening, true>{bits, fp32, off});
  else
    Kokkos::parallel_for(fp16_label, policy, Convert<Widening, false>{bits, fp32, off});
}

}  // namespace

void RuntimeImpl::allocate_gradient16() {
  if (options.gradient_type == GradientType::fp32) return;
  const std::size_t total = layer_offset.back();
  try {
    flat_.grad16 = Bits("omgs::gradient16", total);
    flat_.agg16 = Bits("omgs::aggregated16", total);
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the " + std::string(to_string(options.gradient_type)) +
                " gradient and aggregated buffers (2 x " + std::to_string(total) +
                " elements) failed: " + e.what());
  }
}

/// ready(), group g complete: its 16-bit gradient into the fp32 slot (exact).
void RuntimeImpl::widen_gradient(std::size_t g) {
  if (options.gradient_type == GradientType::fp32) return;
  convert<true>(instance_->ctx.exec(), options.gradient_type, flat_.grad16, flat_.grad,
                instance_->exchanges[g]->slice(), OMGS_LABEL("omgs::widen_bf16"),
                OMGS_LABEL("omgs::widen_fp16"));
}

/// finish(), group g applied or skipped: its fp32 aggregate rounded into the 16-bit one.
void RuntimeImpl::narrow_aggregate(std::size_t g) {
  if (options.gradient_type == GradientType::fp32) return;
  convert<false>(instance_->ctx.exec(), options.gradient_type, flat_.agg16, flat_.agg,
                 instance_->exchanges[g]->slice(), OMGS_LABEL("omgs::narrow_bf16"),
                 OMGS_LABEL("omgs::narrow_fp16"));
}

template <class T>
Kokkos::View<T*, DeviceMemory> RuntimeImpl::slice16(const Bits& flat, std::size_t l,
                                                    GradientType type, const char* accessor) const {
  if (options.gradient_type != type)
    throw Error(std::string("omgs::Runtime::") + accessor + ": the gradient type is " +
                std::string(to_string(options.gradient_type)) + ", not " +
                std::string(to_string(type)) + " (RuntimeOptions::gradient_type)");
  if (l >= layers.size())
    throw Error(std::string("omgs::Runtime::") + accessor + ": layer " + std::to_string(l) +
                " does not exist (" + std::to_string(layers.size()) + " layers)");
  // Unmanaged: the runtime's buffer outlives the views it hands out, as layer_slice's do.
  return Kokkos::View<T*, DeviceMemory>(reinterpret_cast<T*>(flat.data() + layer_offset[l]),
                                        layers[l].numel);
}

template <class View>
Status RuntimeImpl::ready_copy(std::size_t l, const View& grad, GradientType type) noexcept {
  CallGuard guard(in_call);
  if (!guard.ok) return Status::concurrent_call;
  if (!running()) return stopped_at_finalize();
  if (l >= layers.size()) return ready(l);
  if (type != options.gradient_type)
    return fail(Status::shape_mismatch, "omgs: ready(" + std::to_string(l) + ", view): a " +
                                            std::string(to_string(type)) +
                                            " view, but the gradient type is " +
                                            std::string(to_string(options.gradient_type)) +
                                            " (RuntimeOptions::gradient_type)");
  if (grad.extent(0) != layers[l].numel)
    return fail(Status::shape_mismatch,
                "omgs: ready(" + std::to_string(l) + ", view): layer '" + layers[l].name +
                    "' has " + std::to_string(layers[l].numel) + " elements, the view " +
                    std::to_string(grad.extent(0)));
  if (is_ready[l]) return ready(l);
  using T = typename View::non_const_value_type;
  if constexpr (std::is_same<T, float>::value)
    Kokkos::deep_copy(layer_slice(flat_.grad, l, "ready"), grad);
  else
    Kokkos::deep_copy(slice16<T>(flat_.grad16, l, type, "ready"), grad);
  return ready(l);
}

}  // namespace detail

GradientType Runtime::gradient_type() const noexcept {
  return impl_->options.gradient_type;
}

Bf16GradientView Runtime::gradient_bf16(std::size_t l) const {
  return impl_->slice16<bf16_t>(impl_->flat_.grad16, l, GradientType::bf16, "gradient_bf16");
}

Fp16GradientView Runtime::gradient_fp16(std::size_t l) const {
  return impl_->slice16<fp16_t>(impl_->flat_.grad16, l, GradientType::fp16, "gradient_fp16");
}

ConstBf16GradientView Runtime::aggregated_bf16(std::size_t l) const {
  return impl_->slice16<bf16_t>(impl_->flat_.agg16, l, GradientType::bf16, "aggregated_bf16");
}

ConstFp16GradientView Runtime::aggregated_fp16(std::size_t l) const {
  return impl_->slice16<fp16_t>(impl_->flat_.agg16, l, GradientType::fp16, "aggregated_fp16");
}

Status Runtime::ready(std::size_t l, const ConstGradientView& grad) noexcept {
  return impl_->ready_copy(l, grad, GradientType::fp32);
}

Status Runtime::ready(std::size_t l, const ConstBf16GradientView& grad) noexcept {
  return impl_->ready_copy(l, grad, GradientType::bf16);
}

Status Runtime::ready(std::size_t l, const ConstFp16GradientView& grad) noexcept {
  return impl_->ready_copy(l, grad, GradientType::fp16);
}

}  // namespace omgs
