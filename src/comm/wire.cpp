// The registration of the wires (wire.hpp): which collective a caller's GroupBuffers asks
// for. A new collective adds its wire file and one line here.
#include "comm/wire.hpp"

namespace omgs::detail {

std::unique_ptr<Wire> make_wire(const GroupBuffers& b, bool blocking_allreduce) {
  // GroupBuffers names a dense group by its dense buffers (the public struct's contract).
  if (b.dense_numel > 0) return allreduce_sum_wire(b, blocking_allreduce);
  if (b.sparse_numel > 0) return sparse_allreduce_wire(b);
  return allgatherv_pairs_wire(b);
}

}  // namespace omgs::detail
