// The two-level dense exchange (Collective::allreduce_node, docs/comm.md "Two levels"): the
// group's gradient goes to the engine as it is and comes back summed over every rank, as the
// flat dense exchange's does; only its wire differs (WireKind::allreduce_node: reduce-scatter
// inside the node, allreduce of the shard on the rail, allgather inside the node). So its
// iteration is the flat one's (exchange_allreduce.cpp): the fence before MPI reads the
// gradient, the non-finite check of the sum (every rank holds the same sum, so every rank fails
// the group together), the average, and this rank's gradient into its residual when the group
// fails. Its footprint is the flat one's: the shard it adds (n / G floats) is the wire's.
#include "runtime/group_exchange.hpp"

namespace omgs::detail {

std::unique_ptr<GroupExchange> make_allreduce_node_exchange(GroupSlice slice,
                                                            ExchangeContext& ctx) {
  return make_dense_exchange(std::move(slice), ctx, WireKind::allreduce_node, "allreduce_node");
}

}  // namespace omgs::detail
