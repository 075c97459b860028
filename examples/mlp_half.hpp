// omgs-train-mlp --gradient-type bf16 / fp16: the sparse run keeps its gradients in 16 bits.
// The backward pass computes each gradient in fp32 (the gemm's output, as mixed-precision
// training accumulates in fp32), rounds it into the runtime's 16-bit slot and calls ready();
// after finish() SGD reads the runtime's 16-bit aggregate (widened on the fly).
#pragma once

#include <Kokkos_Core.hpp>
#include <array>
#include <string>

#include <omgs/omgs.hpp>

#include "mlp_problem.hpp"

namespace omgs_train_mlp {

/// from (fp32) rounded into to (16-bit type T).
template <class T>
void round_into(const omgs::ConstGradientView& from,
                const Kokkos::View<T*, omgs::DeviceMemory>& to) {
  Kokkos::parallel_for(
      "mlp::round_gradient", Kokkos::RangePolicy<Exec>(0, from.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { to(i) = T(from(i)); });
}

/// from (16-bit type T) widened into to (fp32).
template <class T>
void widen_into(const Kokkos::View<const T*, omgs::DeviceMemory>& from,
                const omgs::GradientView& to) {
  Kokkos::parallel_for(
      "mlp::widen_aggregate", Kokkos::RangePolicy<Exec>(0, from.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { to(i) = static_cast<float>(from(i)); });
}

/// The sparse run's fp32 scratch around the runtime's 16-bit views.
struct HalfGradients {
  omgs::GradientType type = omgs::GradientType::fp32;
  std::array<omgs::GradientView, num_tensors> grad32, agg32;

  /// r's gradient slots become fp32 scratch, its aggregate the widened 16-bit one.
  void attach(Run& r, const Shapes& s) {
    for (int t = 0; t < num_tensors; ++t) {
      grad32[t] = omgs::GradientView("mlp::gradient32", s.numel[t]);
      agg32[t] = omgs::GradientView("mlp::aggregated32", s.numel[t]);
      r.grads[t] = grad32[t];
      r.aggregated[t] = agg32[t];
    }
  }
  /// Tensor t's gradient is computed: rounded into the runtime's slot (before ready(t)).
  void store(const omgs::Runtime& rt, int t) const {
    const auto l = static_cast<std::size_t>(t);
    if (type == omgs::GradientType::bf16)
      round_into(grad32[t], rt.gradient_bf16(l));
    else
      round_into(grad32[t], rt.gradient_fp16(l));
  }
  /// After finish(): the 16-bit aggregates, widened for SGD.
  void load(const omgs::Runtime& rt) const {
    for (int t = 0; t < num_tensors; ++t) {
      const auto l = static_cast<std::size_t>(t);
      if (type == omgs::GradientType::bf16)
        widen_into(rt.aggregated_bf16(l), agg32[t]);
      else
        widen_into(rt.aggregated_fp16(l), agg32[t]);
    }
  }
};

}  // namespace omgs_train_mlp
