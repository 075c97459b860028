// The dense wire: every rank's floats summed on every rank by one MPI_Iallreduce (MPI_SUM),
// on the same communicator and in the same plan order as the pairs; no counts. Or, where the
// run chose it (RuntimeOptions::dense_allreduce), by a blocking MPI_Allreduce that the
// progress thread calls in post(), as Horovod's background thread does: Open MPI's tuned
// MPI_Allreduce picks a ring for large messages where libnbc's MPI_Iallreduce does not
// (docs/comm.md). The group is then a phased wire that is done when post() returns.
// A group of more floats than one post may pass (max_post_count(): INT_MAX without MPI 4's
// large-count calls) is summed by several allreduces of consecutive slices, all posted at
// once in post(), in the same order on every rank, and completed as a phased wire.
#include <algorithm>
#include <vector>

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
        blocking_(b.blocking_allreduce),
        limit_(max_post_count()) {}

  std::string check(int g, const WireSetup& setup) const override {
    if (blocking_ && !setup.inline_reason.empty())
      return "group " + std::to_string(g) +
             ": blocking_allreduce needs the progress thread (this rank runs inline: " +
             setup.inline_reason + ")";
    if (stray_k_ != 0 || buffers_.send() == nullptr || buffers_.recv() == nullptr)
      return "group " + std::to_string(g) +
             ": a dense group needs k = 0 and non-null dense_send and dense_recv";
    return "";
  }
  std::size_t k() const noexcept override { return stray_k_; }
  std::uint64_t extent() const noexcept override { return numel_; }
  std::uint64_t post_limit() const noexcept override { return limit_; }
  bool exchanges_counts() const noexcept override { return false; }

  void init(const WireContext& /*ctx*/, bool staging, int /*ranks*/) override {
    buffers_.init(staging, numel_, numel_);
    requests_.assign(slices() > 1 ? slices() : 0, MPI_REQUEST_NULL);
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (!s.failed) buffers_.stage_in(to_device, numel_);
  }
  bool phased() const noexcept override { return blocking_ || slices() > 1; }
  bool blocks() const noexcept override { return blocking_; }
  int post(const WireContext& ctx, const GroupState& /*s*/, MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    // A post that MPI refused is retried by the driver: the slices posted before stay posted.
    for (; next_ < slices(); ++next_) {
      const std::size_t at = next_ * limit_;
      const std::size_t n = std::min<std::size_t>(limit_, numel_ - at);
      const float* send = buffers_.mpi_send() + at;
      float* recv = buffers_.mpi_recv() + at;
      const int rc = blocking_ ? allreduce(send, recv, n, ctx.comm)
                               : iallreduce(send, recv, n, ctx.comm,
                                            requests_.empty() ? req : &requests_[next_]);
      if (rc != MPI_SUCCESS) return rc;
    }
    next_ = 0;
    return MPI_SUCCESS;
  }
  int advance(GroupState& /*s*/, bool& done) noexcept override {
    int flag = 1;
    const int rc = requests_.empty() ? MPI_SUCCESS
                                     : MPI_Testall(static_cast<int>(requests_.size()),
                                                   requests_.data(), &flag, MPI_STATUSES_IGNORE);
    done = rc != MPI_SUCCESS || flag != 0;
    return rc;
  }
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return bytes(); }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override { return bytes(); }

 private:
  std::uint64_t bytes() const noexcept { return numel_ * sizeof(float); }
  /// The posts of one exchange (1 for an empty group).
  std::size_t slices() const noexcept {
    return numel_ <= limit_ ? 1 : static_cast<std::size_t>((numel_ + limit_ - 1) / limit_);
  }
  /// One slice: MPI 4's large-count call where there is one (any count), else the int one
  /// (n <= limit_ <= INT_MAX).
  static int iallreduce(const float* send, float* recv, std::size_t n, MPI_Comm comm,
                        MPI_Request* req) noexcept {
#if MPI_VERSION >= 4
    return MPI_Iallreduce_c(send, recv, static_cast<MPI_Count>(n), MPI_FLOAT, MPI_SUM, comm, req);
#else
    return MPI_Iallreduce(send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm, req);
#endif
  }
  static int allreduce(const float* send, float* recv, std::size_t n, MPI_Comm comm) noexcept {
#if MPI_VERSION >= 4
    return MPI_Allreduce_c(send, recv, static_cast<MPI_Count>(n), MPI_FLOAT, MPI_SUM, comm);
#else
    return MPI_Allreduce(send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm);
#endif
  }

  StagedBuffers<float> buffers_;
  std::size_t numel_;
  std::size_t stray_k_;                // must be 0 (check): a dense group submits no pairs
  bool blocking_;                      // MPI_Allreduce in post() instead of MPI_Iallreduce
  std::uint64_t limit_;                // floats per post (max_post_count() when the wire was made)
  std::vector<MPI_Request> requests_;  // one per slice where there are several
  std::size_t next_ = 0;               // the next slice to post (a refused post is retried)
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
