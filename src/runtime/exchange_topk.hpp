// Internal: what the exchanges of top-k pairs share (the allgather, exchange_allgather.cpp;
// the sparse allreduce, exchange_sparse_allreduce.cpp): the group's k, this rank's packed
// selection with error feedback (residual + gradient, the new residual in the group's other
// buffer), and the skip that puts the selection back into the residual, so no gradient mass
// is lost when a group is not applied.
#pragma once

#include <string>

#include "runtime/exchange_kernels.hpp"
#include "runtime/group_exchange.hpp"

namespace omgs::detail {

class TopkExchange : public GroupExchange {
 public:
  TopkExchange(GroupSlice slice, double density, ExchangeContext& ctx)
      : GroupExchange(std::move(slice), ctx), k_(selected_count(slice_.numel, density)) {
    send_ = kernels::PairView("omgs::send_pairs", k_);
  }

  std::size_t k() const noexcept override { return k_; }
  const std::string& region() const override;

 protected:
  /// Selects the top-k of residual + gradient with error feedback into send_ (on failure,
  /// non-finite values, the residual is untouched and poison() marks the pairs instead);
  /// fenced on return.
  void select_and_pack(IterationStats& st);
  /// The selection alone (into ctx_.sel_index / sel_value), for an exchange that packs it
  /// its own way (the allgather's compact pair format).
  void select(IterationStats& st);
  /// Not applied on this rank: this rank's selection goes back into its residual (unless
  /// select failed and left the residual untouched) and the aggregated slot is zero.
  void skip();
  /// complete() of a group not applied: `status` and `error` unless an earlier group set
  /// them.
  void report_failure(GroupReport& r, Status status, std::string error) const;
  /// The survivors / pairs in `recv` [0, count) applied: agg[group] = their sum / P.
  void aggregate(GroupReport& r, const kernels::PairView& recv, std::size_t count);

  std::size_t k_;
  kernels::PairView send_;    // k pairs
  bool failed_here_ = false;  // this rank could not contribute in this iteration
};

}  // namespace omgs::detail
