// The pairs' wire: every rank's k (index, value) pairs gathered on every rank by
// MPI_Iallgatherv (the counts and displacements are the engine's: fixed, or exchanged before
// the pairs in variable-count mode). P k may pass an int (LLaMA-7B's k = 6.7 M at P >= 321):
// where MPI has the large-count calls (MPI 4: MPI_Iallgatherv_c) one post takes any count;
// without them (Open MPI 4.1) an exchange of more pairs than one post may pass
// (max_post_count(): INT_MAX) is several allgathervs of consecutive slices of the receive
// buffer (allgatherv_slices.hpp), all posted at once in post(), in the same order on every
// rank, and completed together as a phased wire, like the dense allreduce's split.
#include <vector>

#include "comm/allgatherv_slices.hpp"
#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

#if MPI_VERSION >= 4
using PostCount = MPI_Count;
using PostDispl = MPI_Aint;
#else
using PostCount = int;
using PostDispl = int;
#endif

// The most count and displacement entries the split's posts may hold (P per post): a guard
// against a test-lowered limit far below P k, not a limit a run meets (P k / INT_MAX posts).
constexpr std::uint64_t max_slice_entries = std::uint64_t{1} << 26;

class AllgathervPairs final : public Wire {
 public:
  explicit AllgathervPairs(const GroupBuffers& b)
      : buffers_(b.send, b.recv), k_(b.k), limit_(max_post_count()) {}

  std::string check(int g, const WireSetup& setup) const override {
    const auto ranks = static_cast<std::uint64_t>(setup.ranks);
    const std::string group = "group " + std::to_string(g) + ": ";
    if (k_ > UINT64_MAX / 8 / ranks)
      return group + "k = " + std::to_string(k_) + " pairs x " + std::to_string(ranks) +
             " ranks overflows a 64-bit byte count";
    const std::uint64_t posts = slice_posts(k_ * ranks, limit_);
    if (posts > max_slice_entries / ranks)
      return group + "k = " + std::to_string(k_) + " pairs x " + std::to_string(ranks) +
             " ranks in posts of at most " + std::to_string(limit_) +
             " pairs (OMGS_MAX_POST_COUNT) needs " + std::to_string(posts) + " posts, too many";
    if (k_ > 0 && (buffers_.send() == nullptr || buffers_.recv() == nullptr))
      return group + "null send or receive buffer";
    return "";
  }
  std::size_t k() const noexcept override { return k_; }
  std::uint64_t extent() const noexcept override { return 0; }
  std::uint64_t post_limit() const noexcept override { return limit_; }
  bool exchanges_counts() const noexcept override { return true; }

  void init(const WireContext& ctx, bool staging, int ranks) override {
    const auto P = static_cast<std::size_t>(ranks);
    ranks_ = P;
    buffers_.init(staging, k_, k_ * P);
    MPI_Comm_rank(ctx.comm, &me_);
    const auto most = static_cast<std::size_t>(slice_posts(k_ * P, limit_));
    counts_.assign(most * P, 0);
    displs_.assign(most * P, 0);
    mine_.assign(most, 0);
    from_.assign(most, 0);
    requests_.assign(most > 1 ? most : 0, MPI_REQUEST_NULL);
  }
  void stage_out(const CopyFunction& to_host, std::size_t count) noexcept override {
    buffers_.stage_out(to_host, count);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.total > 0) buffers_.stage_in(to_device, static_cast<std::size_t>(s.total));
  }
  /// Phased where an exchange may need several posts (P k past the limit).
  bool phased() const noexcept override { return !requests_.empty(); }
  int post(const WireContext& ctx, const GroupState& s, MPI_Request* req) noexcept override {
    if (next_ == 0) slice(s);
    // A post that MPI refused is retried by the driver: the slices posted before stay posted.
    for (; next_ < posts_; ++next_) {
      const int rc = post_slice(ctx, next_, requests_.empty() ? req : &requests_[next_]);
      if (rc != MPI_SUCCESS) return rc;
    }
    if (!requests_.empty()) *req = MPI_REQUEST_NULL;
    next_ = 0;
    return MPI_SUCCESS;
  }
  int advance(GroupState& /*s*/, bool& done) noexcept override {
    int flag = 1;
    const int rc =
        MPI_Testall(static_cast<int>(posts_), requests_.data(), &flag, MPI_STATUSES_IGNORE);
    done = rc != MPI_SUCCESS || flag != 0;
    return rc;
  }
  std::uint64_t bytes_sent(const GroupState& s) const noexcept override {
    return s.send_count * sizeof(SparsePair);
  }
  std::uint64_t bytes_received(const GroupState& s) const noexcept override {
    return s.total * sizeof(SparsePair);
  }

 private:
  /// This exchange's posts: each one's counts and displacements, from the engine's.
  void slice(const GroupState& s) noexcept {
    const std::size_t P = s.counts.size();
    posts_ = static_cast<std::size_t>(slice_posts(s.total, limit_));
    for (std::size_t p = 0; p < posts_; ++p)
      from_[p] =
          slice_of(p, limit_, s.counts.data(), s.displs.data(), P, static_cast<std::size_t>(me_),
                   &counts_[p * P], &displs_[p * P], &mine_[p]);
  }
  int post_slice(const WireContext& ctx, std::size_t p, MPI_Request* req) noexcept {
    const std::size_t P = ranks_;
    const SparsePair* send = buffers_.mpi_send() + from_[p];
    SparsePair* recv = buffers_.mpi_recv() + p * limit_;
#if MPI_VERSION >= 4
    return MPI_Iallgatherv_c(send, mine_[p], ctx.pair_type, recv, &counts_[p * P], &displs_[p * P],
                             ctx.pair_type, ctx.comm, req);
#else
    return MPI_Iallgatherv(send, mine_[p], ctx.pair_type, recv, &counts_[p * P], &displs_[p * P],
                           ctx.pair_type, ctx.comm, req);
#endif
  }

  StagedBuffers<SparsePair> buffers_;
  std::size_t k_;
  std::uint64_t limit_;  // pairs per post (max_post_count() when the wire was made)
  int me_ = 0;
  std::size_t ranks_ = 1;
  // One row of P per post, for as many posts as P k pairs take (MPI reads them until the
  // posts complete, so each post keeps its own).
  std::vector<PostCount> counts_;
  std::vector<PostDispl> displs_;
  std::vector<PostCount> mine_;        // this rank's count in each post
  std::vector<std::uint64_t> from_;    // where its part of each post starts among its pairs
  std::vector<MPI_Request> requests_;  // one per post where there may be several
  std::size_t posts_ = 1;              // the posts of the exchange in flight
  std::size_t next_ = 0;               // the next post (a refused post is retried)
};

}  // namespace

std::unique_ptr<Wire> allgatherv_pairs_wire(const GroupBuffers& b) {
  refuse_stray_fields(b, pair_fields);
  return std::make_unique<AllgathervPairs>(b);
}

}  // namespace omgs::detail
