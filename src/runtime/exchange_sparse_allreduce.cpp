// The sparse-allreduce exchange (Collective::sparse_allreduce): each rank selects and packs
// the group's top-k with error feedback as the allgather does; the engine's sparse
// allreduce (src/comm/wire_sparse_allreduce.cpp) sums the pairs by region and gathers the
// global top-k of the sums on every rank. finish() scatter-adds the survivors / P and puts
// this rank's pairs that did not survive back into its residual, so no gradient mass is
// lost. A rank that cannot contribute (non-finite values) sends NaN values, which survive
// the global selection (the largest magnitude key) and are seen by every rank, so every rank
// skips the group together, each keeping its selection in its residual. With a compact
// RuntimeOptions::pair_wire the engine sends the compact pair format, and its dropped pairs
// also carry what bf16 / fp16 rounded away (this rank's sent values, its region's sums), so
// the residual keeps it.
#include <algorithm>
#include <climits>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include "runtime/exchange_topk.hpp"

namespace omgs::detail {

namespace {

class SparseAllreduceExchange final : public TopkExchange {
 public:
  SparseAllreduceExchange(GroupSlice slice, double density, ExchangeContext& ctx)
      : TopkExchange(std::move(slice), density, ctx) {
    // The survivors of every region: at most k + P - 1, the threshold bin's ties cut.
    const auto survivors = static_cast<std::size_t>(
        sparse_allreduce::max_survivors(slice_.numel, k_, static_cast<std::uint64_t>(ctx.ranks)));
    recv_ = kernels::PairView("omgs::sparse_allreduce_survivors", survivors);
    // This rank's pairs, and with a compact wire its region's survivors' rounding errors.
    const std::size_t back = ctx.pair_wire == PairWire::pairs8 ? k_ : k_ + survivors;
    dropped_ = kernels::PairView("omgs::sparse_allreduce_dropped", back);
  }

  const char* name() const noexcept override { return "sparse allreduce"; }
  GroupBuffers wire() const override {
    GroupBuffers b{send_.data(), recv_.data(), k_};
    b.kind = WireKind::sparse_allreduce;
    b.sparse_numel = slice_.numel;
    b.dropped = dropped_.data();
    b.pair_wire = ctx_.pair_wire;
    return b;
  }
  // Known only once the exchange completes (it depends on where the pairs fall and how
  // many survive): complete() reports the engine's count of this exchange.
  std::size_t bytes_sent() const noexcept override { return 0; }
  std::size_t bytes_received() const noexcept override { return 0; }
  void prepare(IterationStats& st) override {
    select_and_pack(st);
    if (failed_here_) kernels::poison_pairs(exec(), send_, k_);
    detail::fence(exec());  // the pairs are complete before MPI sees them
  }

  void complete(WaitStatus w, GroupReport r) override {
    const int g = static_cast<int>(slice_.g);
    const GroupStats now = r.engine.group_stats(g);
    r.stats.bytes_sent += now.bytes_sent - last_.bytes_sent;
    r.stats.bytes_received += now.bytes_received - last_.bytes_received;
    count_pairs(r.stats, now.pairs_sent - last_.pairs_sent,
                now.pair_bytes_sent - last_.pair_bytes_sent);
    last_ = now;
    if (w != WaitStatus::ok) {
      skip();
      report_failure(r, Status::comm_failed,
                     "omgs: finish(): the sparse allreduce of " + slice_.label + " " +
                         collective_failure(w) +
                         "; this rank's selection was kept in its residual");
      return;
    }
    const std::size_t survivors = r.engine.recv_total(g);
    const int bad = kernels::count_nonfinite_pairs(exec(), recv_, survivors, ctx_.bad_blocks,
                                                   ctx_.bad_blocks_host);
    if (bad == 0) {
      aggregate(r, recv_, survivors);
      const std::size_t dropped = r.engine.dropped_total(g);
      if (dropped > 0)
        kernels::add_back(exec(), dropped_, 0, dropped, ctx_.resid_of(slice_.g), slice_.offset);
      return;
    }
    // Every rank holds the same survivors, so every rank skips the group.
    skip();
    report_failure(r, Status::nonfinite_gradient,
                   "omgs: " + slice_.label + " summed to " + std::to_string(bad) +
                       " non-finite values in the sparse allreduce (" +
                       std::to_string(r.stats.nonfinite) +
                       " non-finite values in this rank's groups of this iteration); the step is "
                       "skipped for it on every rank");
  }

 private:
  kernels::PairView recv_, dropped_;  // S = min(n, k + P - 1) survivors, k (+ S) to take back
  GroupStats last_;                   // the engine's cumulative counts at the last completion
};

}  // namespace

/// This exchange's pairs (this rank's k, room for S = min(n, k + P - 1) survivors), its
/// dropped pairs (k, and with a compact pair wire S more for its region's rounding errors),
/// and the engine's exchange (SparseAllreduce::room_items: its window, the region's sums, the
/// S survivors): O(k + P) per rank, never P k (docs/comm.md, "Memory independent of P").
std::uint64_t sparse_allreduce_footprint(std::uint64_t n, std::uint64_t k, std::uint64_t ranks,
                                         PairWire wire) {
  const std::uint64_t survivors = sparse_allreduce::max_survivors(n, k, ranks);
  const std::uint64_t dropped = wire == PairWire::pairs8 ? k : k + survivors;
  const int p = static_cast<int>(std::min<std::uint64_t>(ranks, INT_MAX));
  return k + survivors + dropped + SparseAllreduce::room_items(n, k, p, wire);
}

std::unique_ptr<GroupExchange> make_sparse_allreduce_exchange(GroupSlice slice, double density,
                                                              ExchangeContext& ctx) {
  return std::make_unique<SparseAllreduceExchange>(std::move(slice), density, ctx);
}

}  // namespace omgs::detail
