// The allgather exchange (Collective::sparse): each rank selects the group's top-k of
// residual + gradient (error feedback), packs k (index, value) pairs, and every rank's
// pairs are gathered on every rank (one MPI_Iallgatherv); finish() scatter-adds them / P.
// A rank that cannot contribute (non-finite values) sends the failure marker instead, so
// every rank skips the group together; a skipped group's selection goes back into the
// residual, so no gradient mass is lost.
#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/exchange_topk.hpp"

namespace omgs::detail {

namespace {

class AllgatherExchange final : public TopkExchange {
 public:
  AllgatherExchange(GroupSlice slice, double density, ExchangeContext& ctx)
      : TopkExchange(std::move(slice), density, ctx) {
    recv_ = kernels::PairView("omgs::recv_pairs", k_ * static_cast<std::size_t>(ctx.ranks));
  }

  GroupBuffers wire() const override { return {send_.data(), recv_.data(), k_}; }
  bool contributed() const noexcept override { return !failed_here_; }
  std::size_t bytes_sent() const noexcept override { return k_ * sizeof(SparsePair); }
  std::size_t bytes_received() const noexcept override {
    return k_ * static_cast<std::size_t>(ctx_.ranks) * sizeof(SparsePair);
  }
  double predicted_s(const PerfModel& model, double density) const override {
    return model.allgather_s(slice_.numel, ctx_.ranks, density);
  }

  void prepare(IterationStats& st) override {
    select_and_pack(st);
    detail::fence(exec());  // the pairs are complete before MPI sees them
  }

  void complete(WaitStatus w, GroupReport r) override {
    if (w != WaitStatus::ok) {
      // MPI failed the collective (or it was never submitted): its pairs are not valid.
      skip();
      report_failure(r, Status::comm_failed,
                     "omgs: finish(): the allgather of " + slice_.label + " " +
                         collective_failure(w) +
                         "; this rank's selection was kept in its residual");
      return;
    }
    const int bad = kernels::count_failed_blocks(exec(), recv_, 0, k_, ctx_.ranks, ctx_.bad_blocks,
                                                 ctx_.bad_blocks_host);
    if (bad == 0) {
      aggregate(r, recv_, k_ * static_cast<std::size_t>(ctx_.ranks));
      r.stats.bytes_received += bytes_received();
      return;
    }
    // Some rank could not contribute: no rank applies this group; healthy ranks keep their
    // selection in the residual, so no gradient mass is lost.
    skip();
    report_failure(r, Status::nonfinite_gradient,
                   "omgs: " + slice_.label + " held non-finite values on " + std::to_string(bad) +
                       " rank(s) (" + std::to_string(r.stats.nonfinite) +
                       " non-finite values in this rank's groups of this iteration); the step is "
                       "skipped for it on every rank");
  }

 private:
  kernels::PairView recv_;  // P * k pairs
};

}  // namespace

std::unique_ptr<GroupExchange> make_allgather_exchange(GroupSlice slice, double density,
                                                       ExchangeContext& ctx) {
  return std::make_unique<AllgatherExchange>(std::move(slice), density, ctx);
}

}  // namespace omgs::detail
