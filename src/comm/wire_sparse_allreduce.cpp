// The sparse allreduce's wire: every rank's pairs summed by region and the global top-k of
// the sums gathered on every rank (SparseAllreduce, include/omgs/detail/sparse_allreduce.hpp).
// It is phased: post() starts the exchange, and the driver advances it on every pass beside
// MPI_Testsome until it is done, so its steps never block the other groups. Its steps are
// point-to-point messages on the engine's phased communicator, which every sparse-allreduce
// group shares, each on tags of its own (WireContext::tag_base), so they need no place in
// the plan order of the engine's communicator nor any order among the groups. It runs on
// host buffers; device buffers are staged.
#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

// extent(): a sparse-allreduce group is told apart from a dense group of the same size.
constexpr std::uint64_t sparse_allreduce_tag = std::uint64_t{1} << 62;

class SparseAllreduceWire final : public Wire {
 public:
  explicit SparseAllreduceWire(const GroupBuffers& b)
      : buffers_(b.send, b.recv),
        dropped_(b.dropped),
        k_(b.k),
        n_(b.sparse_numel),
        pair_wire_(b.pair_wire) {}

  std::string check(int g, const WireSetup& setup) const override {
    const int ranks = setup.ranks;
    const std::string group = "group " + std::to_string(g) + ": ";
    const unsigned long long total = static_cast<unsigned long long>(k_) * ranks;
    if (total > static_cast<unsigned long long>(INT_MAX))
      return group + "k = " + std::to_string(k_) + " pairs x " + std::to_string(ranks) +
             " ranks overflows MPI's int count";
    if (n_ > (std::uint64_t{1} << 32))
      return group + "sparse_numel = " + std::to_string(n_) + " is over 2^32 (indices are 32-bit)";
    if (k_ > 0 && (buffers_.send() == nullptr || buffers_.recv() == nullptr || dropped_ == nullptr))
      return group + "a sparse-allreduce group needs non-null send, recv and dropped";
    return "";
  }
  std::size_t k() const noexcept override { return k_; }
  std::uint64_t extent() const noexcept override { return sparse_allreduce_tag | n_; }
  bool exchanges_counts() const noexcept override { return false; }
  bool host_only() const noexcept override { return true; }
  bool phased() const noexcept override { return true; }
  int tags() const noexcept override { return SparseAllreduce::tags; }

  void init(const WireContext& ctx, bool staging, int ranks) override {
    // The ranks agreed on n and k (agree_on_groups): the constructor's check cannot fail.
    exchange_ = std::make_unique<SparseAllreduce>(
        SparseAllreduce::SharedComm{ctx.phased_comm, ctx.tag_base}, n_, k_, pair_wire_);
    // GroupBuffers' sizes: the survivors of all regions (the threshold bin's ties cut), and
    // with a compact wire this rank's pairs plus its region's survivors' rounding errors.
    capacity_ = static_cast<std::size_t>(
        sparse_allreduce::max_survivors(n_, k_, static_cast<std::uint64_t>(ranks)));
    dropped_capacity_ = pair_wire_ == PairWire::pairs8 ? k_ : k_ + capacity_;
    // What arrives is the exchange's own (survivors, dropped): only the send side mirrors.
    buffers_.init(staging, k_, 0);
  }
  void stage_out(const CopyFunction& to_host, std::size_t count) noexcept override {
    buffers_.stage_out(to_host, count);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.failed) return;
    if (s.total > 0)
      to_device(buffers_.recv(), exchange_->survivors().data(),
                static_cast<std::size_t>(s.total) * sizeof(SparsePair));
    if (dropped_count_ > 0)
      to_device(dropped_, exchange_->dropped().data(), dropped_count_ * sizeof(SparsePair));
  }
  int post(const WireContext& /*ctx*/, const GroupState& s, MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    try {
      exchange_->start(buffers_.mpi_send(), static_cast<std::size_t>(s.send_count));
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    return MPI_SUCCESS;
  }
  int advance(GroupState& s, bool& done) noexcept override {
    done = false;
    try {
      if (!exchange_->test()) return MPI_SUCCESS;
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    const auto& survivors = exchange_->survivors();
    const auto& dropped = exchange_->dropped();
    // The survivors are at most k + P - 1 (max_survivors), the dropped among ours (<= k)
    // and, with a compact wire, our region's survivors.
    if (survivors.size() > capacity_ || dropped.size() > dropped_capacity_)
      return fail("omgs: sparse allreduce: " + std::to_string(survivors.size()) + " survivors or " +
                  std::to_string(dropped.size()) + " dropped pairs exceed the buffers");
    s.total = survivors.size();
    dropped_count_ = dropped.size();
    std::fill(s.counts.begin(), s.counts.end(), 0);
    std::fill(s.displs.begin(), s.displs.end(), 0);
    if (!buffers_.staging()) {  // host buffers: the owner reads them after the completion is popped
      if (!survivors.empty())
        std::memcpy(buffers_.recv(), survivors.data(), survivors.size() * sizeof(SparsePair));
      if (!dropped.empty())
        std::memcpy(dropped_, dropped.data(), dropped.size() * sizeof(SparsePair));
    }
    done = true;
    return MPI_SUCCESS;
  }
  std::uint64_t bytes_sent(const GroupState& s) const noexcept override {
    return s.failed ? 0 : exchange_->stats().bytes_sent;
  }
  std::uint64_t bytes_received(const GroupState& s) const noexcept override {
    return s.failed ? 0 : exchange_->stats().bytes_received;
  }
  std::uint64_t pairs_sent(const GroupState& s) const noexcept override {
    return s.failed ? 0 : exchange_->stats().pairs_sent;
  }
  std::uint64_t pair_bytes_sent(const GroupState& s) const noexcept override {
    return s.failed ? 0 : exchange_->stats().pair_bytes_sent;
  }
  std::size_t dropped() const noexcept override { return dropped_count_; }

 private:
  /// The exchange's own error (a pair outside the group, an MPI step that failed) is named
  /// on stderr: the engine reports only that the group failed.
  static int fail(const std::string& what) noexcept {
    std::fprintf(stderr, "%s\n", what.c_str());
    return MPI_ERR_OTHER;
  }

  StagedBuffers<SparsePair> buffers_;
  SparsePair* dropped_;
  std::size_t k_;
  std::uint64_t n_;
  PairWire pair_wire_;
  std::size_t capacity_ = 0, dropped_capacity_ = 0;
  // [P] writes at completion, [O] reads after the completion-queue pop (which orders it):
  // this rank's pairs in dropped_ after the last exchange.
  std::size_t dropped_count_ = 0;
  std::unique_ptr<SparseAllreduce> exchange_;
};

}  // namespace

std::unique_ptr<Wire> sparse_allreduce_wire(const GroupBuffers& b) {
  refuse_stray_fields(b, pair_fields | sparse_allreduce_fields);
  return std::make_unique<SparseAllreduceWire>(b);
}

}  // namespace omgs::detail
