// The 16-bit dense wire (WireKind::allreduce_mean16; docs/comm.md, "Dense groups in 16
// bits"): a reduce-scatter whose partial sums are fp32, then an allgather of 16-bit means.
// Each rank owns one shard of the group (n / P elements, the first n % P shards one more):
//   1. every rank's 16-bit values of shard r go to rank r (2 bytes each);
//   2. rank r widens its shard's P contributions exactly to fp32, sums them in fp32 (in rank
//      order, so every run rounds alike), divides by P and rounds once to 16 bits (what the
//      rounding lost, times P, goes to dense16_error: the caller's residual keeps it);
//   3. rank r sends its rounded shard to every rank: every rank holds every mean.
// Each rank sends 2 (P - 1) / P * 2 n bytes, as a ring allreduce of 16-bit values would, but
// no partial sum is ever rounded to 16 bits: a user-defined MPI op on 16-bit values (the
// alternative) rounds every pairwise sum, an error that grows with P. The mean (not the sum)
// is rounded so that fp16 does not overflow where the values do not. Phased, point to point
// on the engine's phased communicator with two tags of its own (step 1's and step 3's:
// WireContext::tag_base), so its steps need no place in the engine's plan order and the
// engine keeps a fixed number of communicators; with blocking_allreduce, both steps complete
// in post(). It runs on host buffers: the sum is the progress thread's; device buffers are
// staged. A shard of more values than one MPI call may count (max_post_count(), at most
// INT_MAX: a group past 2^31 P values) goes as several messages of consecutive pieces, on the
// same tag between the same two ranks, which MPI matches in the order they were posted.
#include <omgs/detail/pair_format_values.hpp>

#include <algorithm>
#include <climits>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

// extent(): a 16-bit dense group is told apart from an fp32 one of the same size.
constexpr std::uint64_t mean16_tag = std::uint64_t{1} << 61;
// The most messages a step may post to each rank: a guard against a test-lowered limit far
// below a shard, not a limit a run meets (a shard of 2^31 P values takes two per rank).
constexpr std::uint64_t max_messages = std::uint64_t{1} << 26;

class AllreduceMean16 final : public Wire {
 public:
  explicit AllreduceMean16(const GroupBuffers& b)
      : buffers_(b.dense16_send, b.dense16_recv),
        error_(b.dense16_error),
        numel_(b.dense_numel),
        brain_(b.dense_wire == DenseWire::bf16),
        format_ok_(b.dense_wire == DenseWire::bf16 || b.dense_wire == DenseWire::fp16),
        stray_(b.k != 0 || b.dense_send != nullptr || b.dense_recv != nullptr),
        blocking_(b.blocking_allreduce),
        limit_(std::min<std::uint64_t>(max_post_count(), INT_MAX)) {}

  std::string check(int g, const WireSetup& setup) const override {
    const std::string group = "group " + std::to_string(g) + ": ";
    if (!format_ok_) return group + "a 16-bit dense group needs dense_wire bf16 or fp16";
    if (blocking_ && !setup.inline_reason.empty())
      return group + "blocking_allreduce needs the progress thread (this rank runs inline: " +
             setup.inline_reason + ")";
    const auto P = static_cast<std::uint64_t>(setup.ranks);
    if (pieces(numel_ / P + 1) > max_messages / P)
      return group + "dense_numel = " + std::to_string(numel_) + " values in messages of at most " +
             std::to_string(limit_) + " (OMGS_MAX_POST_COUNT) need too many messages";
    if (stray_ || buffers_.send() == nullptr || buffers_.recv() == nullptr)
      return group +
             "a 16-bit dense group needs k = 0, non-null dense16_send and dense16_recv, and no "
             "fp32 dense_send / dense_recv";
    return "";
  }
  std::size_t k() const noexcept override { return 0; }
  std::uint64_t extent() const noexcept override {
    return mean16_tag | (brain_ ? std::uint64_t{1} << 60 : 0) | numel_;
  }
  std::uint64_t post_limit() const noexcept override { return limit_; }
  bool exchanges_counts() const noexcept override { return false; }
  bool host_only() const noexcept override { return true; }
  bool phased() const noexcept override { return true; }
  bool blocks() const noexcept override { return blocking_; }
  int tags() const noexcept override { return 2; }

  void init(const WireContext& ctx, bool staging, int ranks) override {
    comm_ = ctx.phased_comm;
    tag_ = ctx.tag_base;
    MPI_Comm_rank(comm_, &me_);
    const int me = me_;
    const std::size_t base = numel_ / static_cast<std::size_t>(ranks);
    const std::size_t extra = numel_ % static_cast<std::size_t>(ranks);
    counts_.resize(static_cast<std::size_t>(ranks));
    displs_.resize(counts_.size());
    std::size_t messages = 0;
    for (std::size_t r = 0, at = 0; r < counts_.size(); ++r) {
      counts_[r] = base + (r < extra ? 1 : 0);
      displs_[r] = at;
      at += counts_[r];
      messages += pieces(counts_[r]);
    }
    const std::size_t mine = counts_[static_cast<std::size_t>(me)];
    // Step 1 sends every shard and receives this one P times; step 3 fewer.
    requests_.assign(messages + counts_.size() * pieces(mine), MPI_REQUEST_NULL);
    shards_.assign(mine * counts_.size(), 0);
    sums_.assign(mine, 0.0f);
    // Staged (or no error buffer): the errors go to a host mirror of this rank's shard.
    if (staging || error_ == nullptr) host_error_.assign(static_cast<std::size_t>(mine), 0.0f);
    own_error_ = staging || error_ == nullptr ? host_error_.data()
                                              : error_ + displs_[static_cast<std::size_t>(me)];
    buffers_.init(staging, numel_, numel_);
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.failed) return;
    buffers_.stage_in(to_device, numel_);
    if (error_ != nullptr && !host_error_.empty())
      to_device(error_ + displs_[static_cast<std::size_t>(me_)], host_error_.data(),
                host_error_.size() * sizeof(float));
  }
  int post(const WireContext& /*ctx*/, const GroupState& /*s*/,
           MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    int rc = scatter();
    if (!blocking_ || rc != MPI_SUCCESS) return rc;
    // Both steps now; advance() reports the group done at once.
    rc = MPI_Waitall(static_cast<int>(used_), requests_.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    reduce_shard();
    rc = gather();
    if (rc == MPI_SUCCESS)
      rc = MPI_Waitall(static_cast<int>(used_), requests_.data(), MPI_STATUSES_IGNORE);
    step_ = rc == MPI_SUCCESS ? Step::done : Step::idle;
    return rc;
  }
  int advance(GroupState& /*s*/, bool& done) noexcept override {
    done = false;
    if (step_ == Step::done) {
      step_ = Step::idle;
      done = true;
      return MPI_SUCCESS;
    }
    int flag = 0;
    const int rc =
        MPI_Testall(static_cast<int>(used_), requests_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || !flag) return rc;
    if (step_ == Step::gather) {
      step_ = Step::idle;
      done = true;
      return MPI_SUCCESS;
    }
    reduce_shard();
    return gather();
  }
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return bytes(); }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override { return bytes(); }

 private:
  enum class Step : std::uint8_t { idle, scatter, gather, done };

  std::uint64_t bytes() const noexcept { return numel_ * sizeof(std::uint16_t); }

  /// Messages of `count` values: one per piece of at most limit_ (one, empty, for none).
  std::size_t pieces(std::uint64_t count) const noexcept {
    return count == 0 ? 1 : static_cast<std::size_t>((count - 1) / limit_ + 1);
  }
  /// `count` values to rank r from `send`, or else from r into `recv`, in pieces (requests
  /// from used_ on).
  int post_pieces(const std::uint16_t* send, std::uint16_t* recv, std::size_t count, int r,
                  int tag) noexcept {
    for (std::size_t j = 0, n = pieces(count); j < n; ++j) {
      const std::size_t at = j * limit_;
      const auto c = static_cast<int>(std::min<std::uint64_t>(limit_, count - at));
      const int rc = send != nullptr
                         ? MPI_Isend(send + at, c, MPI_UINT16_T, r, tag, comm_, &requests_[used_])
                         : MPI_Irecv(recv + at, c, MPI_UINT16_T, r, tag, comm_, &requests_[used_]);
      if (rc != MPI_SUCCESS) return rc;
      ++used_;
    }
    return MPI_SUCCESS;
  }
  /// Step 1 posted: this rank's values of shard r to rank r, shard me from every rank (on
  /// tag_); requests_ holds their requests (used_ of them).
  int scatter() noexcept {
    const int P = static_cast<int>(counts_.size());
    const std::size_t mine = sums_.size();
    used_ = 0;
    step_ = Step::scatter;
    for (int r = 0; r < P; ++r) {
      const auto u = static_cast<std::size_t>(r);
      int rc = post_pieces(nullptr, shards_.data() + u * mine, mine, r, tag_);
      if (rc == MPI_SUCCESS)
        rc = post_pieces(buffers_.mpi_send() + displs_[u], nullptr, counts_[u], r, tag_);
      if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  }
  /// Step 3 posted: this rank's rounded shard to every other rank, theirs into place (on
  /// tag_ + 1).
  int gather() noexcept {
    const int P = static_cast<int>(counts_.size());
    std::uint16_t* recv = buffers_.mpi_recv();
    const auto me = static_cast<std::size_t>(me_);
    used_ = 0;
    step_ = Step::gather;
    for (int r = 0; r < P; ++r) {
      if (r == me_) continue;
      const auto u = static_cast<std::size_t>(r);
      int rc = post_pieces(nullptr, recv + displs_[u], counts_[u], r, tag_ + 1);
      if (rc == MPI_SUCCESS)
        rc = post_pieces(recv + displs_[me], nullptr, counts_[me], r, tag_ + 1);
      if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  }

  /// Step 2: this rank's shard of every rank summed in fp32 (rank order), its mean rounded
  /// once to 16 bits into this rank's place of the received buffer (the allgather's own).
  void reduce_shard() noexcept {
    const std::size_t m = sums_.size(), P = counts_.size();
    for (std::size_t i = 0; i < m; ++i) sums_[i] = 0.0f;
    for (std::size_t r = 0; r < P; ++r) {
      const std::uint16_t* in = shards_.data() + r * m;
      if (brain_)
        for (std::size_t i = 0; i < m; ++i) sums_[i] += pairs::from_bf16(in[i]);
      else
        for (std::size_t i = 0; i < m; ++i) sums_[i] += pairs::from_fp16(in[i]);
    }
    const float ranks = static_cast<float>(P);
    std::uint16_t* out = buffers_.mpi_recv() + displs_[static_cast<std::size_t>(me_)];
    for (std::size_t i = 0; i < m; ++i) {
      out[i] = brain_ ? pairs::to_bf16(sums_[i] / ranks) : pairs::to_fp16(sums_[i] / ranks);
      own_error_[i] =
          sums_[i] - ranks * (brain_ ? pairs::from_bf16(out[i]) : pairs::from_fp16(out[i]));
    }
  }

  StagedBuffers<std::uint16_t> buffers_;
  float* error_;  // the caller's dense16_error (may be null)
  std::size_t numel_;
  bool brain_, format_ok_, stray_, blocking_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the engine's phased communicator (shared)
  int tag_ = 0;                    // step 1's tag; step 3's is tag_ + 1
  int me_ = 0;
  std::uint64_t limit_;  // values per message (max_post_count(), at most INT_MAX)
  std::vector<std::size_t> counts_, displs_;  // the shards: every rank's sizes and offsets
  std::size_t used_ = 0;                      // the requests of the step in flight
  std::vector<std::uint16_t> shards_;         // [P] P x this rank's shard, as received
  std::vector<float> sums_;                   // [P] this rank's fp32 partial sums
  std::vector<float> host_error_;             // [P] the shard's errors when staged (or unused)
  float* own_error_ = nullptr;                // where reduce_shard writes them
  std::vector<MPI_Request> requests_;         // [P] the step in flight: receives, then sends
  Step step_ = Step::idle;                    // [P]
};

}  // namespace

std::unique_ptr<Wire> allreduce_mean16_wire(const GroupBuffers& b) {
  // dense_send / dense_recv (the fp32 form's) and k are the wire's own check.
  GroupBuffers mean16 = b;
  mean16.k = 0;
  mean16.dense_send = nullptr;
  mean16.dense_recv = nullptr;
  refuse_stray_fields(mean16, dense_fields | dense16_fields);
  return std::make_unique<AllreduceMean16>(b);
}

}  // namespace omgs::detail
