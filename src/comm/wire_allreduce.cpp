// The dense wire: every rank's floats summed on every rank by one MPI_Iallreduce (MPI_SUM),
// on the same communicator and in the same plan order as the pairs; no counts. Or, where the
// run chose it (RuntimeOptions::dense_allreduce), by a blocking MPI_Allreduce that the
// progress thread calls in post(), as Horovod's background thread does: Open MPI's tuned
// MPI_Allreduce picks a ring for large messages where libnbc's MPI_Iallreduce does not
// (docs/comm.md). The group is then a phased wire that is done when post() returns.
#include <climits>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

class AllreduceSum final : public Wire {
 public:
  AllreduceSum(const GroupBuffers& b, bool blocking)
      : send_(b.dense_send),
        recv_(b.dense_recv),
        numel_(b.dense_numel),
        stray_k_(b.k),
        blocking_(blocking) {}

  std::string check(int g, int /*ranks*/) const override {
    if (numel_ > static_cast<std::size_t>(INT_MAX))
      return "group " + std::to_string(g) + ": dense_numel = " + std::to_string(numel_) +
             " floats overflows MPI's int count";
    if (stray_k_ != 0 || send_ == nullptr || recv_ == nullptr)
      return "group " + std::to_string(g) +
             ": a dense group needs k = 0 and non-null dense_send and dense_recv";
    return "";
  }
  std::size_t k() const noexcept override { return stray_k_; }
  std::uint64_t extent() const noexcept override { return numel_; }
  bool exchanges_counts() const noexcept override { return false; }

  void init(const WireContext& /*ctx*/, bool staging, int /*ranks*/) override {
    mpi_send_ = send_;
    mpi_recv_ = recv_;
    if (!staging) return;
    host_send_.resize(numel_);
    host_recv_.resize(numel_);
    mpi_send_ = host_send_.data();
    mpi_recv_ = host_recv_.data();
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    to_host(host_send_.data(), send_, bytes());
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (!s.failed) to_device(recv_, host_recv_.data(), bytes());
  }
  bool phased() const noexcept override { return blocking_; }
  bool blocks() const noexcept override { return blocking_; }
  int post(const WireContext& ctx, const GroupState& /*s*/, MPI_Request* req) noexcept override {
    if (blocking_) {  // done on return; advance() (the default) reports it at once
      *req = MPI_REQUEST_NULL;
      return MPI_Allreduce(mpi_send_, mpi_recv_, static_cast<int>(numel_), MPI_FLOAT, MPI_SUM,
                           ctx.comm);
    }
    return MPI_Iallreduce(mpi_send_, mpi_recv_, static_cast<int>(numel_), MPI_FLOAT, MPI_SUM,
                          ctx.comm, req);
  }
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return bytes(); }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override { return bytes(); }

 private:
  std::uint64_t bytes() const noexcept { return numel_ * sizeof(float); }

  const float* send_;
  float* recv_;
  std::size_t numel_;
  std::size_t stray_k_;              // must be 0 (check): a dense group submits no pairs
  bool blocking_;                    // MPI_Allreduce in post() instead of MPI_Iallreduce
  const float* mpi_send_ = nullptr;  // send_ or the host mirror
  float* mpi_recv_ = nullptr;
  std::vector<float> host_send_, host_recv_;  // staging mirrors (empty unless staging)
};

}  // namespace

std::unique_ptr<Wire> allreduce_sum_wire(const GroupBuffers& b, bool blocking) {
  return std::make_unique<AllreduceSum>(b, blocking);
}

}  // namespace omgs::detail
