// The top-k exchanges' shared part (exchange_topk.hpp).
#include "runtime/exchange_topk.hpp"

#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/clock.hpp"

namespace omgs::detail {

const std::string& TopkExchange::region() const {
  return OMGS_LABEL("omgs::sparsify");
}

void TopkExchange::select_and_pack(IterationStats& st) {
  select(st);
  kernels::pack_pairs(exec(), send_, 0, ctx_.sel_index, ctx_.sel_value, k_, failed_here_);
}

void TopkExchange::select(IterationStats& st) {
  const auto r = range();
  FlatBuffers& f = flat();
  const std::size_t g = slice_.g;
  // The one-read form: the new residual goes to the group's other buffer, which becomes
  // current on success; on failure the current one is untouched and stays current.
  const TopkResult res = ctx_.selector->select_with_feedback(
      Kokkos::subview(f.grad, r), Kokkos::subview(ctx_.resid_of(g), r),
      Kokkos::subview(ctx_.resid_next(g), r), k_, ctx_.sel_index, ctx_.sel_value);
  failed_here_ = !res.ok();
  if (!failed_here_) ctx_.swapped[g] ^= 1;
  if (failed_here_) st.nonfinite += res.nonfinite;
}

void TopkExchange::skip() {
  if (!failed_here_)
    kernels::add_back(exec(), send_, 0, k_, ctx_.resid_of(slice_.g), slice_.offset);
  zero_aggregate();
}

void TopkExchange::report_failure(GroupReport& r, Status status, std::string error) const {
  if (r.stats.status != Status::ok) return;
  r.stats.status = status;
  r.stats.failed_group = static_cast<int>(slice_.g);
  r.error = std::move(error);
}

void TopkExchange::aggregate(GroupReport& r, const kernels::PairView& recv, std::size_t count) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::aggregate"));
  const double t0 = now_s();
  r.agg_start_s = t0;
  const float scale = 1.0f / static_cast<float>(ctx_.ranks);
  kernels::scatter_add(exec(), recv, 0, count, flat().agg, slice_.offset, slice_.numel, scale);
  r.agg_end_s = now_s();  // launched (complete on host back-ends; finish() fences once)
  r.stats.aggregate_s += r.agg_end_s - t0;
  Kokkos::Profiling::popRegion();
}

}  // namespace omgs::detail
