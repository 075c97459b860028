// Module select: the non-template parts and the explicit instantiation of the selector for
// Kokkos::DefaultExecutionSpace (other spaces instantiate implicitly from the header).
#include <omgs/select.hpp>

namespace omgs {

const char* to_string(TopkStatus status) noexcept {
  switch (status) {
    case TopkStatus::ok:
      return "ok";
    case TopkStatus::nonfinite_input:
      return "non-finite input (NaN or Inf)";
    case TopkStatus::k_exceeds_n:
      return "k exceeds n";
    case TopkStatus::n_exceeds_capacity:
      return "n exceeds the selector's max_n";
    case TopkStatus::output_too_small:
      return "output views hold fewer than k entries";
    case TopkStatus::shape_mismatch:
      return "grad and residual differ in length";
    case TopkStatus::residual_overlap:
      return "residual_in and residual_out overlap";
  }
  return "unknown status";
}

// Exported by the attribute on the extern template declaration in the header (GCC ignores
// one repeated here, with a warning).
template class TopkSelector<Kokkos::DefaultExecutionSpace>;

}  // namespace omgs
