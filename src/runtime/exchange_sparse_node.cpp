// The sparse node-summed exchange (Collective::sparse_node, docs/comm.md "The sparse
// node-summed form"): each rank sends its gradient plus its residual; the wire
// (WireKind::sparse_node) sums the node, selects the top-k of each rank's shard of the node's
// sum on the host, exchanges the shards' pairs across nodes and shares the summed shards in
// the node. Every rank gets the same sum, averaged here into the aggregated buffer; the wire
// writes what each rank keeps (the rest of its shard, 0 elsewhere) into its residual.
//
// Buffers: the group's current residual stays in FlatBuffers::resid (this exchange never
// swaps, so ExchangeContext::swapped[g] stays 0), and resid_alt, unused otherwise, holds the
// sent gradient + residual. A failed group (an MPI error, or a non-finite sum, which every
// rank sees alike: the wire then leaves every residual as it was) keeps this rank's finite
// gradient in its residual, as the dense exchanges do, so no mass is lost.
//
// No top-k on the device: k() is 0 for the runtime (no selection to mask for momentum, no
// pairs packed by prepare()); the group's k (density x n, spread over the shards) is the
// wire's. Bytes are the engine's count of each exchange (they depend on the node's shape).
#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/clock.hpp"
#include "runtime/dense_kernels.hpp"
#include "runtime/group_exchange.hpp"

namespace omgs::detail {

namespace {

class SparseNodeExchange final : public GroupExchange {
 public:
  SparseNodeExchange(GroupSlice slice, double density, ExchangeContext& ctx)
      : GroupExchange(std::move(slice), ctx), k_(selected_count(slice_.numel, density)) {}

  std::size_t k() const noexcept override { return 0; }
  const std::string& region() const override { return OMGS_LABEL("omgs::sparse_node"); }
  const char* name() const noexcept override { return "sparse_node"; }
  GroupBuffers wire() const override {
    GroupBuffers b;
    b.kind = WireKind::sparse_node;
    b.dense_send = flat().resid_alt.data() + slice_.offset;
    b.dense_recv = flat().agg.data() + slice_.offset;
    b.dense_numel = slice_.numel;
    b.k = k_;
    b.node_residual = flat().resid.data() + slice_.offset;
    return b;
  }
  std::size_t bytes_sent() const noexcept override { return 0; }
  std::size_t bytes_received() const noexcept override { return 0; }
  void prepare(IterationStats& /*st*/) override {
    const auto range = this->range();
    Kokkos::deep_copy(exec(), Kokkos::subview(flat().resid_alt, range),
                      Kokkos::subview(flat().resid, range));
    kernels::add_into(exec(), flat().resid_alt, flat().grad, slice_.offset, slice_.numel);
    detail::fence(exec());  // gradient + residual complete before MPI reads them
  }
  void complete(WaitStatus w, GroupReport r) override;

 private:
  std::size_t k_;
  GroupStats last_;  // the engine's counts after the previous exchange
};

void SparseNodeExchange::complete(WaitStatus w, GroupReport r) {
  IterationStats& st = r.stats;
  FlatBuffers& f = flat();
  const std::size_t off = slice_.offset, n = slice_.numel;
  const GroupStats now = r.engine.group_stats(static_cast<int>(slice_.g));
  st.bytes_sent += now.bytes_sent - last_.bytes_sent;
  st.bytes_received += now.bytes_received - last_.bytes_received;
  last_ = now;
  // Every rank holds the same sum, so every rank sees the same non-finite count.
  const int bad =
      w == WaitStatus::ok
          ? kernels::count_nonfinite(exec(), f.agg, off, n, ctx_.bad_blocks, ctx_.bad_blocks_host)
          : 0;
  if (w == WaitStatus::ok && bad == 0) {
    r.agg_start_s = now_s();
    kernels::scale(exec(), f.agg, off, n, 1.0f / static_cast<float>(ctx_.ranks));
    r.agg_end_s = now_s();
    st.aggregate_s += r.agg_end_s - r.agg_start_s;
    return;
  }
  // Not applied: the wire left the residual as it was; this rank's finite gradient joins it.
  keep_gradient_in_residual(w, bad, r, "the sparse_node exchange of", "sparse_node");
}

}  // namespace

/// An upper bound: the dense exchange's (the flat buffers) and the wire's host buffers (the
/// shard, its selection's work space, the rail's and the node's pairs: at most 2 n items).
std::uint64_t sparse_node_footprint(std::uint64_t n, std::uint64_t k, std::uint64_t ranks) {
  return allreduce_footprint(n, k, ranks) + 2 * n;
}

std::unique_ptr<GroupExchange> make_sparse_node_exchange(GroupSlice slice, double density,
                                                         ExchangeContext& ctx) {
  return std::make_unique<SparseNodeExchange>(std::move(slice), density, ctx);
}

}  // namespace omgs::detail
