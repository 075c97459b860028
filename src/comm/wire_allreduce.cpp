// The dense wire: every rank's floats summed on every rank by one MPI_Iallreduce (MPI_SUM),
// on the same communicator and in the same plan order as the pairs; no counts. Or, where the
// run chose it (RuntimeOptions::dense_allreduce), by a blocking MPI_Allreduce that the
// progress thread calls in post(), as Horovod's background thread does: Open MPI's tuned
// MPI_Allreduce picks a ring for large messages where libnbc's MPI_Iallreduce does not
// (docs/comm.md). The group is then a phased wire that is done when post() returns.
#include <climits>

#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

class AllreduceSum final : public Wire {
 public:
  explicit AllreduceSum(const GroupBuffers& b)
      : buffers_(b.dense_send, b.dense_recv),
        numel_(b.dense_numel),
        stray_k_(b.k),
        blocking_(b.blocking_allreduce) {}

  std::string check(int g, const WireSetup& setup) const override {
    if (blocking_ && !setup.inline_reason.empty())
      return "group " + std::to_string(g) +
             ": blocking_allreduce needs the progress thread (this rank runs inline: " +
             setup.inline_reason + ")";
    if (numel_ > static_cast<std::size_t>(INT_MAX))
      return "group " + std::to_string(g) + ": dense_numel = " + std::to_string(numel_) +
             " floats overflows MPI's int count";
    if (stray_k_ != 0 || buffers_.send() == nullptr || buffers_.recv() == nullptr)
      return "group " + std::to_string(g) +
             ": a dense group needs k = 0 and non-null dense_send and dense_recv";
    return "";
  }
  std::size_t k() const noexcept override { return stray_k_; }
  std::uint64_t extent() const noexcept override { return numel_; }
  bool exchanges_counts() const noexcept override { return false; }

  void init(const WireContext& /*ctx*/, bool staging, int /*ranks*/) override {
    buffers_.init(staging, numel_, numel_);
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (!s.failed) buffers_.stage_in(to_device, numel_);
  }
  bool phased() const noexcept override { return blocking_; }
  bool blocks() const noexcept override { return blocking_; }
  int post(const WireContext& ctx, const GroupState& /*s*/, MPI_Request* req) noexcept override {
    if (blocking_) {  // done on return; advance() (the default) reports it at once
      *req = MPI_REQUEST_NULL;
      return MPI_Allreduce(buffers_.mpi_send(), buffers_.mpi_recv(), static_cast<int>(numel_),
                           MPI_FLOAT, MPI_SUM, ctx.comm);
    }
    return MPI_Iallreduce(buffers_.mpi_send(), buffers_.mpi_recv(), static_cast<int>(numel_),
                          MPI_FLOAT, MPI_SUM, ctx.comm, req);
  }
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return bytes(); }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override { return bytes(); }

 private:
  std::uint64_t bytes() const noexcept { return numel_ * sizeof(float); }

  StagedBuffers<float> buffers_;
  std::size_t numel_;
  std::size_t stray_k_;  // must be 0 (check): a dense group submits no pairs
  bool blocking_;        // MPI_Allreduce in post() instead of MPI_Iallreduce
};

}  // namespace

std::unique_ptr<Wire> allreduce_sum_wire(const GroupBuffers& b) {
  // k is the dense group's own check (it must be 0): the other pair fields are stray.
  GroupBuffers dense = b;
  dense.k = 0;
  refuse_stray_fields(dense, dense_fields);
  return std::make_unique<AllreduceSum>(b);
}

}  // namespace omgs::detail
