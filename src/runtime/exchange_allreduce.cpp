// The allreduce exchange (Collective::dense, docs/planner.md): the group's gradient goes to
// the engine as it is, one MPI_Iallreduce (sum) into the aggregated buffer, posted in plan
// order with the other groups; finish() averages it. No top-k, and the residual is not
// touched, unless the group fails: then this rank's gradient goes into its residual (when
// finite), as a failed allgather group's selection does. In the 16-bit form
// (RuntimeOptions::dense_wire bf16 / fp16; the engine's WireKind::allreduce_mean16) the
// group sends gradient + residual rounded to 16 bits and keeps the rounding error in its
// residual (error feedback, as the compact pairs do); the engine returns the mean, and each
// rank's residual also keeps P x the rounding error of the means of its shard, so that the
// applied means plus every residual hold all the gradient mass.
#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/clock.hpp"
#include "runtime/dense_kernels.hpp"
#include "runtime/group_exchange.hpp"

namespace omgs::detail {

namespace {

class AllreduceExchange final : public GroupExchange {
 public:
  /// `kind`: the flat MPI_Iallreduce (allreduce_sum) or the two-level wire (allreduce_node),
  /// `name` the trace's word for it. The flat one travels in 16 bits where
  /// RuntimeOptions::dense_wire says so (allreduce_mean16).
  AllreduceExchange(GroupSlice slice, ExchangeContext& ctx, WireKind kind, const char* name)
      : GroupExchange(std::move(slice), ctx),
        kind_(kind),
        name_(name),
        wire16_(kind == WireKind::allreduce_sum &&
                (ctx.dense_wire == DenseWire::bf16 || ctx.dense_wire == DenseWire::fp16)) {
    if (!wire16_) return;
    send16_ = kernels::Bits16View("omgs::dense16_send", slice_.numel);
    recv16_ = kernels::Bits16View("omgs::dense16_recv", slice_.numel);
    error_ = GradientView("omgs::dense16_error", slice_.numel);  // zero off this rank's shard
  }

  std::size_t k() const noexcept override { return 0; }
  const std::string& region() const override { return OMGS_LABEL("omgs::dense"); }
  const char* name() const noexcept override { return name_; }
  GroupBuffers wire() const override {
    GroupBuffers b;
    b.kind = wire16_ ? WireKind::allreduce_mean16 : kind_;
    if (wire16_) {
      b.dense16_send = send16_.data();
      b.dense16_recv = recv16_.data();
      b.dense_wire = ctx_.dense_wire;
      b.dense16_error = error_.data();
    } else {
      b.dense_send = flat().grad.data() + slice_.offset;
      b.dense_recv = flat().agg.data() + slice_.offset;
    }
    b.dense_numel = slice_.numel;
    b.blocking_allreduce = kind_ == WireKind::allreduce_sum && ctx_.blocking_allreduce;
    return b;
  }
  std::size_t bytes_sent() const noexcept override {
    return slice_.numel * (wire16_ ? sizeof(std::uint16_t) : sizeof(float));
  }
  std::size_t bytes_received() const noexcept override { return bytes_sent(); }
  void prepare(IterationStats& /*st*/) override {
    if (wire16_)
      kernels::narrow_with_residual(exec(), send16_, flat().grad, ctx_.resid_of(slice_.g),
                                    slice_.offset, slice_.numel, brain());
    detail::fence(exec());  // the gradient is complete before MPI reads it
  }

  void complete(WaitStatus w, GroupReport r) override {
    IterationStats& st = r.stats;
    FlatBuffers& f = flat();
    const std::size_t off = slice_.offset, n = slice_.numel;
    // Every rank holds the same sum, so every rank sees the same non-finite count.
    if (w == WaitStatus::ok && wire16_)
      kernels::widen_into(exec(), recv16_, f.agg, off, n, brain());
    const int bad =
        w == WaitStatus::ok
            ? kernels::count_nonfinite(exec(), f.agg, off, n, ctx_.bad_blocks, ctx_.bad_blocks_host)
            : 0;
    if (w == WaitStatus::ok && bad == 0) {
      r.agg_start_s = now_s();
      if (wire16_)  // the engine averaged it; what this rank's rounding lost stays here
        kernels::keep_rounding_error(exec(), send16_, error_, f.grad, ctx_.resid_of(slice_.g), off,
                                     n, brain());
      else
        kernels::scale(exec(), f.agg, off, n, 1.0f / static_cast<float>(ctx_.ranks));
      st.bytes_received += bytes_received();
      r.agg_end_s = now_s();
      st.aggregate_s += r.agg_end_s - r.agg_start_s;
      return;
    }
    // Not applied: the aggregated slot is zero and a finite gradient of this rank goes to
    // its residual, so no gradient mass is lost.
    keep_gradient_in_residual(w, bad, r, std::string("the ") + name_ + " of dense", "dense");
  }

 private:
  bool brain() const noexcept { return ctx_.dense_wire == DenseWire::bf16; }

  WireKind kind_;
  const char* name_;
  bool wire16_;                          // RuntimeOptions::dense_wire bf16 / fp16 in force
  kernels::Bits16View send16_, recv16_;  // the 16-bit form's values (empty in fp32)
  GradientView error_;                   // P x the rounding error of the means this rank computed
};

}  // namespace

/// An upper bound: counted as an allgather group's pairs (the exchange itself works in the
/// flat buffers, which the check counts per element).
std::uint64_t allreduce_footprint(std::uint64_t n, std::uint64_t k, std::uint64_t ranks,
                                  DenseWire dense) {
  return allgather_footprint(n, k, ranks, PairWire::pairs8) +
         (dense == DenseWire::fp32 ? 0 : 2 * n);
}

std::unique_ptr<GroupExchange> make_allreduce_exchange(GroupSlice slice, ExchangeContext& ctx) {
  return std::make_unique<AllreduceExchange>(std::move(slice), ctx, WireKind::allreduce_sum,
                                             "allreduce");
}

std::unique_ptr<GroupExchange> make_dense_exchange(GroupSlice slice, ExchangeContext& ctx,
                                                   WireKind kind, const char* name) {
  return std::make_unique<AllreduceExchange>(std::move(slice), ctx, kind, name);
}

}  // namespace omgs::detail
