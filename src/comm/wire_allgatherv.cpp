// The pairs' wire: every rank's k (index, value) pairs gathered on every rank by one
// MPI_Iallgatherv (the counts and displacements are the engine's: fixed, or exchanged
// before the pairs in variable-count mode).
#include <climits>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

class AllgathervPairs final : public Wire {
 public:
  explicit AllgathervPairs(const GroupBuffers& b) : send_(b.send), recv_(b.recv), k_(b.k) {}

  std::string check(int g, int ranks) const override {
    const unsigned long long total = static_cast<unsigned long long>(k_) * ranks;
    if (k_ > static_cast<std::size_t>(INT_MAX) || total > static_cast<unsigned long long>(INT_MAX))
      return "group " + std::to_string(g) + ": k = " + std::to_string(k_) + " pairs x " +
             std::to_string(ranks) + " ranks = " + std::to_string(total) +
             " pairs overflows MPI's int count (MPI " + std::to_string(MPI_VERSION) + "." +
             std::to_string(MPI_SUBVERSION) + " has no large-count collectives used here)";
    if (k_ > 0 && (send_ == nullptr || recv_ == nullptr))
      return "group " + std::to_string(g) + ": null send or receive buffer";
    return "";
  }
  std::size_t k() const noexcept override { return k_; }
  std::uint64_t extent() const noexcept override { return 0; }
  bool exchanges_counts() const noexcept override { return true; }

  void init(const WireContext& /*ctx*/, bool staging, int ranks) override {
    mpi_send_ = send_;
    mpi_recv_ = recv_;
    if (!staging) return;
    host_send_.resize(k_);
    host_recv_.resize(k_ * static_cast<std::size_t>(ranks));
    mpi_send_ = host_send_.data();
    mpi_recv_ = host_recv_.data();
  }
  void stage_out(const CopyFunction& to_host, std::size_t count) noexcept override {
    if (count > 0) to_host(host_send_.data(), send_, count * sizeof(SparsePair));
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.total > 0)
      to_device(recv_, host_recv_.data(), static_cast<std::size_t>(s.total) * sizeof(SparsePair));
  }
  int post(const WireContext& ctx, const GroupState& s, MPI_Request* req) noexcept override {
    return MPI_Iallgatherv(mpi_send_, s.send_count, ctx.pair_type, mpi_recv_, s.counts.data(),
                           s.displs.data(), ctx.pair_type, ctx.comm, req);
  }
  std::uint64_t bytes_sent(const GroupState& s) const noexcept override {
    return static_cast<std::uint64_t>(s.send_count) * sizeof(SparsePair);
  }
  std::uint64_t bytes_received(const GroupState& s) const noexcept override {
    return static_cast<std::uint64_t>(s.total) * sizeof(SparsePair);
  }

 private:
  const SparsePair* send_;
  SparsePair* recv_;
  std::size_t k_;
  const SparsePair* mpi_send_ = nullptr;  // send_ or the host mirror
  SparsePair* mpi_recv_ = nullptr;
  std::vector<SparsePair> host_send_, host_recv_;  // staging mirrors (empty unless staging)
};

}  // namespace

std::unique_ptr<Wire> allgatherv_pairs_wire(const GroupBuffers& b) {
  return std::make_unique<AllgathervPairs>(b);
}

}  // namespace omgs::detail
