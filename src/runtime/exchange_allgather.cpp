// The allgather exchange (Collective::sparse): each rank selects the group's top-k of
// residual + gradient (error feedback), packs k (index, value) pairs, and every rank's
// pairs are gathered on every rank (one MPI_Iallgatherv); finish() scatter-adds them / P.
// A rank that cannot contribute (non-finite values) sends the failure marker instead, so
// every rank skips the group together; a skipped group's selection goes back into the
// residual, so no gradient mass is lost. With RuntimeOptions::pair_wire other than pairs8
// the pairs travel in the compact pair format (<omgs/pair_format.hpp>): one block per rank in
// the same buffers, counted in 8-byte units; 16-bit values leave their rounding error in
// the residual, and a skipped group's block is decoded back into it.
#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/clock.hpp"
#include "runtime/exchange_topk.hpp"

namespace omgs::detail {

namespace {

class AllgatherExchange final : public TopkExchange {
 public:
  AllgatherExchange(GroupSlice slice, double density, ExchangeContext& ctx)
      : TopkExchange(std::move(slice), density, ctx),
        compact_(ctx.pair_wire != PairWire::pairs8),
        layout_(make_pair_layout(slice_.numel, compact_ ? k_ : 0, wire_values(ctx.pair_wire))),
        units_(compact_ ? layout_.words / 2 : k_) {
    if (compact_) {
      send_ = kernels::PairView("omgs::send_pairs", units_);
      starts_ = kernels::StartView("omgs::chunk_starts",
                                   layout_.chunks * static_cast<std::size_t>(ctx.ranks));
      unpacked_ =
          kernels::PairView("omgs::unpacked_pairs", k_ * static_cast<std::size_t>(ctx.ranks));
    }
    recv_ = kernels::PairView("omgs::recv_pairs", units_ * static_cast<std::size_t>(ctx.ranks));
  }

  const char* name() const noexcept override { return "allgather"; }
  GroupBuffers wire() const override {
    GroupBuffers b{send_.data(), recv_.data(), units_};
    b.kind = WireKind::allgather_pairs;
    return b;
  }
  bool contributed() const noexcept override { return !failed_here_; }
  std::size_t bytes_sent() const noexcept override { return units_ * sizeof(SparsePair); }
  std::size_t bytes_received() const noexcept override {
    return units_ * static_cast<std::size_t>(ctx_.ranks) * sizeof(SparsePair);
  }
  void prepare(IterationStats& st) override {
    if (compact_) {
      select(st);
      kernels::encode_block(exec(), layout_, send_, ctx_.sel_index, ctx_.sel_value,
                            Kokkos::subview(ctx_.resid_of(slice_.g), range()), failed_here_);
    } else {
      select_and_pack(st);
    }
    detail::fence(exec());  // the pairs are complete before MPI sees them
  }

  void complete(WaitStatus w, GroupReport r) override {
    if (w != WaitStatus::ok) {
      // MPI failed the collective (or it was never submitted): its pairs are not valid.
      skip_group();
      report_failure(r, Status::comm_failed,
                     "omgs: finish(): the allgather of " + slice_.label + " " +
                         collective_failure(w) +
                         "; this rank's selection was kept in its residual");
      return;
    }
    const int bad = kernels::count_failed_blocks(exec(), recv_, 0, units_, ctx_.ranks,
                                                 ctx_.bad_blocks, ctx_.bad_blocks_host);
    if (bad == 0) {
      if (compact_)
        decode_all(r);
      else
        aggregate(r, recv_, k_ * static_cast<std::size_t>(ctx_.ranks));
      r.stats.bytes_received += bytes_received();
      return;
    }
    // Some rank could not contribute: no rank applies this group; healthy ranks keep their
    // selection in the residual, so no gradient mass is lost.
    skip_group();
    report_failure(r, Status::nonfinite_gradient,
                   "omgs: " + slice_.label + " held non-finite values on " + std::to_string(bad) +
                       " rank(s) (" + std::to_string(r.stats.nonfinite) +
                       " non-finite values in this rank's groups of this iteration); the step is "
                       "skipped for it on every rank");
  }

 private:
  /// Every rank's compact block decoded and scatter-added / P (aggregate()'s compact form).
  void decode_all(GroupReport& r) {
    Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::aggregate"));
    const double t0 = now_s();
    r.agg_start_s = t0;
    const float scale = 1.0f / static_cast<float>(ctx_.ranks);
    kernels::unpack_and_scatter(exec(), layout_, recv_, ctx_.ranks, starts_, unpacked_, flat().agg,
                                slice_.offset, scale);
    r.agg_end_s = now_s();  // launched (complete on host back-ends; finish() fences once)
    r.stats.aggregate_s += r.agg_end_s - t0;
    Kokkos::Profiling::popRegion();
  }

  /// skip() for either form: the compact block is decoded back into the residual.
  void skip_group() {
    if (!compact_) return skip();
    if (!failed_here_)
      kernels::decode_blocks(exec(), layout_, send_, 1, starts_, ctx_.resid_of(slice_.g),
                             slice_.offset, 1.0f, false);
    zero_aggregate();
  }

  bool compact_;                // the compact pair format, else the 8-byte pairs
  PairLayout layout_;           // the compact block (empty for the 8-byte pairs)
  std::size_t units_;           // 8-byte units per rank: k pairs, or the block's words / 2
  kernels::PairView recv_;      // P * units
  kernels::StartView starts_;   // the compact decode's chunk starts (P * chunks)
  kernels::PairView unpacked_;  // the compact blocks as P * k pairs, then scatter-added
};

}  // namespace

/// This rank's k pairs and the P k gathered; a compact pair wire's blocks are unpacked into
/// P k more pairs for the scatter-add (the blocks are smaller than the 8-byte pairs counted).
std::uint64_t allgather_footprint(std::uint64_t /*n*/, std::uint64_t k, std::uint64_t ranks,
                                  PairWire wire) {
  return k * (1 + ranks) + (wire == PairWire::pairs8 ? 0 : ranks * k);
}

std::unique_ptr<GroupExchange> make_allgather_exchange(GroupSlice slice, double density,
                                                       ExchangeContext& ctx) {
  return std::make_unique<AllgatherExchange>(std::move(slice), density, ctx);
}

}  // namespace omgs::detail
