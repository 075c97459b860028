// The pairs' wire: every rank's k (index, value) pairs gathered on every rank by one
// MPI_Iallgatherv (the counts and displacements are the engine's: fixed, or exchanged
// before the pairs in variable-count mode).
#include <climits>

#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

class AllgathervPairs final : public Wire {
 public:
  explicit AllgathervPairs(const GroupBuffers& b) : buffers_(b.send, b.recv), k_(b.k) {}

  std::string check(int g, const WireSetup& setup) const override {
    const int ranks = setup.ranks;
    const unsigned long long total = static_cast<unsigned long long>(k_) * ranks;
    if (k_ > static_cast<std::size_t>(INT_MAX) || total > static_cast<unsigned long long>(INT_MAX))
      return "group " + std::to_string(g) + ": k = " + std::to_string(k_) + " pairs x " +
             std::to_string(ranks) + " ranks = " + std::to_string(total) +
             " pairs overflows MPI's int count (MPI " + std::to_string(MPI_VERSION) + "." +
             std::to_string(MPI_SUBVERSION) + " has no large-count collectives used here)";
    if (k_ > 0 && (buffers_.send() == nullptr || buffers_.recv() == nullptr))
      return "group " + std::to_string(g) + ": null send or receive buffer";
    return "";
  }
  std::size_t k() const noexcept override { return k_; }
  std::uint64_t extent() const noexcept override { return 0; }
  bool exchanges_counts() const noexcept override { return true; }

  void init(const WireContext& /*ctx*/, bool staging, int ranks) override {
    buffers_.init(staging, k_, k_ * static_cast<std::size_t>(ranks));
  }
  void stage_out(const CopyFunction& to_host, std::size_t count) noexcept override {
    buffers_.stage_out(to_host, count);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.total > 0) buffers_.stage_in(to_device, static_cast<std::size_t>(s.total));
  }
  int post(const WireContext& ctx, const GroupState& s, MPI_Request* req) noexcept override {
    return MPI_Iallgatherv(buffers_.mpi_send(), s.send_count, ctx.pair_type, buffers_.mpi_recv(),
                           s.counts.data(), s.displs.data(), ctx.pair_type, ctx.comm, req);
  }
  std::uint64_t bytes_sent(const GroupState& s) const noexcept override {
    return static_cast<std::uint64_t>(s.send_count) * sizeof(SparsePair);
  }
  std::uint64_t bytes_received(const GroupState& s) const noexcept override {
    return static_cast<std::uint64_t>(s.total) * sizeof(SparsePair);
  }

 private:
  StagedBuffers<SparsePair> buffers_;
  std::size_t k_;
};

}  // namespace

std::unique_ptr<Wire> allgatherv_pairs_wire(const GroupBuffers& b) {
  refuse_stray_fields(b, pair_fields);
  return std::make_unique<AllgathervPairs>(b);
}

}  // namespace omgs::detail
