// The sparse node-summed wire (WireKind::sparse_node, docs/comm.md "The sparse node-summed
// form"): the node sums its ranks' gradients (plus residuals) before it sparsifies, and only
// the shards' top-k pairs cross the fabric.
//   1. MPI_Ireduce_scatter of dense_send inside the node: local rank i holds shard i of the
//      node's sum (n / G elements, the first n mod G one more; n < G leaves shards empty);
//   2. on the host, by the progress thread: the k_i largest |values| of the shard (ties to the
//      lower index); the rest of the shard is what this rank keeps (node_residual);
//   3. MPI_Iallgather of the shard's k_i pairs on the rail (the ranks with the same local
//      index, hence the same k_i): the only step that crosses the fabric;
//   4. MPI_Iallgatherv inside the node of the summed shards, as floats or as the rail's pairs,
//      whichever is fewer bytes (the same choice on every rank: it depends on n, k, G, N).
// A shard with a non-finite value sends NaN pairs: every shard it reaches, hence every rank's
// dense_recv, is then non-finite, and no rank writes node_residual (the exchange fails the
// group on every rank). The steps share the engine's node and rail communicators with the
// two-level allreduce's, in the order NodeComms keeps. It runs on host buffers.
#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/node_comms.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

// extent(): a node-summed group is told apart from the dense groups of the same size.
constexpr std::uint64_t sparse_node_tag = std::uint64_t{1} << 60;

/// Pairs selected from a shard of `shard` of the group's n elements: k in proportion, at
/// least one of a non-empty shard (so that a non-finite shard can always say so).
std::size_t shard_k(std::size_t k, std::size_t shard, std::size_t n) {
  if (shard == 0 || n == 0) return 0;
  const std::size_t ks = static_cast<std::size_t>((static_cast<std::uint64_t>(k) * shard + n - 1) /
                                                  n);  // ceil(k shard / n)
  return std::min(std::max<std::size_t>(ks, 1), shard);
}

class SparseNode final : public Wire {
 public:
  explicit SparseNode(const GroupBuffers& b)
      : buffers_(b.dense_send, b.dense_recv),
        resid_(nullptr, b.node_residual),
        numel_(b.dense_numel),
        k_(b.k) {}

  std::string check(int g, const WireSetup& setup) const override {
    const std::string group = "group " + std::to_string(g) + ": ";
    if (!setup.unequal_nodes.empty())
      return group + "a sparse node-summed group: " + setup.unequal_nodes;
    if (numel_ > static_cast<std::size_t>(INT_MAX))
      return group + "dense_numel = " + std::to_string(numel_) +
             " floats overflows MPI's int count";
    if (k_ == 0 || k_ > numel_)
      return group +
             "a sparse node-summed group needs 1 <= k <= dense_numel (k = " + std::to_string(k_) +
             ", dense_numel = " + std::to_string(numel_) + ")";
    if (buffers_.send() == nullptr || buffers_.recv() == nullptr || resid_.recv() == nullptr)
      return group +
             "a sparse node-summed group needs non-null dense_send, dense_recv and "
             "node_residual";
    return "";
  }
  std::size_t k() const noexcept override { return k_; }
  std::uint64_t extent() const noexcept override { return sparse_node_tag | numel_; }
  bool exchanges_counts() const noexcept override { return false; }
  bool host_only() const noexcept override { return true; }  // the selection runs on the host
  bool phased() const noexcept override { return true; }

  void init(const WireContext& ctx, bool staging, int /*ranks*/) override {
    node_ = ctx.node;
    pair_type_ = ctx.pair_type;
    shape();
    buffers_.init(staging, numel_, numel_);
    resid_.init(staging, 0, numel_);
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (s.failed) return;
    buffers_.stage_in(to_device, numel_);
    if (kept_) resid_.stage_in(to_device, numel_);
  }
  int post(const WireContext& /*ctx*/, const GroupState& /*s*/,
           MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    seq_ = node_->next_start();
    step_ = 1;
    host_done_ = 0;
    kept_ = false;
    const int rc = MPI_Ireduce_scatter(buffers_.mpi_send(), shard_.data(), counts_.data(),
                                       MPI_FLOAT, MPI_SUM, node_->node(), &req_);
    if (rc == MPI_SUCCESS) node_->started();
    return rc;
  }
  int advance(GroupState& /*s*/, bool& done) noexcept override;
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return sent_; }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override {
    return received_;
  }

 private:
  void shape();
  void select() noexcept;
  void sum_shard() noexcept;
  void finish() noexcept;
  int post_rail() noexcept {
    const int ks = static_cast<int>(ks_[local_]);
    return MPI_Iallgather(sel_.data(), ks, pair_type_, rail_.data(), ks, pair_type_, node_->rail(),
                          &req_);
  }
  int post_share() noexcept {
    if (share_pairs_)
      return MPI_Iallgatherv(rail_.data(), static_cast<int>(rail_.size()), pair_type_,
                             node_pairs_.data(), pair_counts_.data(), pair_displs_.data(),
                             pair_type_, node_->node_gather(), &req_);
    return MPI_Iallgatherv(sum_.data(), static_cast<int>(sum_.size()), MPI_FLOAT,
                           buffers_.mpi_recv(), counts_.data(), displs_.data(), MPI_FLOAT,
                           node_->node_gather(), &req_);
  }

  StagedBuffers<float> buffers_;  // dense_send (gradient + residual), dense_recv (the sum)
  StagedBuffers<float> resid_;    // node_residual (receive side only)
  std::size_t numel_, k_;
  NodeComms* node_ = nullptr;
  MPI_Datatype pair_type_ = MPI_DATATYPE_NULL;
  // The shape, fixed at init: each local rank's shard and k, and how the node shares.
  std::size_t local_ = 0, nodes_ = 1;
  std::vector<int> counts_, displs_;            // each local rank's shard of the group
  std::vector<std::size_t> ks_;                 // each local rank's pairs per node
  std::vector<int> pair_counts_, pair_displs_;  // the node share in pairs: N k_i each
  bool share_pairs_ = false;
  std::uint64_t sent_ = 0, received_ = 0;  // bytes of one exchange (every step)
  // [P] the exchange in flight: its number among the two-level exchanges, its step (1
  // reduce-scatter, 2 rail allgather, 3 node share), the steps whose host work is done,
  // the step's request; whether the sum was finite (node_residual written).
  std::uint64_t seq_ = 0;
  int step_ = 0, host_done_ = 0;
  bool kept_ = false;
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::vector<float> shard_;            // the node's sum on this rank's shard, then what it keeps
  std::vector<std::uint32_t> order_;    // the selection's work space
  std::vector<SparsePair> sel_;         // this shard's k_i pairs
  std::vector<SparsePair> rail_;        // every node's k_i pairs of this shard
  std::vector<float> sum_;              // the summed shard (the dense share)
  std::vector<SparsePair> node_pairs_;  // every shard's rail pairs (the pair share)
};

void SparseNode::shape() {
  const auto G = static_cast<std::size_t>(node_->ranks_per_node());
  local_ = static_cast<std::size_t>(node_->local_rank());
  nodes_ = static_cast<std::size_t>(node_->nodes());
  counts_.assign(G, 0);
  displs_.assign(G, 0);
  ks_.assign(G, 0);
  pair_counts_.assign(G, 0);
  pair_displs_.assign(G, 0);
  std::size_t pairs = 0;
  for (std::size_t i = 0; i < G; ++i) {
    counts_[i] = static_cast<int>(numel_ / G + (i < numel_ % G ? 1 : 0));
    displs_[i] = i == 0 ? 0 : displs_[i - 1] + counts_[i - 1];
    ks_[i] = shard_k(k_, static_cast<std::size_t>(counts_[i]), numel_);
    pair_counts_[i] = static_cast<int>(nodes_ * ks_[i]);
    pair_displs_[i] = i == 0 ? 0 : pair_displs_[i - 1] + pair_counts_[i - 1];
    pairs += nodes_ * ks_[i];
  }
  share_pairs_ = pairs * sizeof(SparsePair) < numel_ * sizeof(float);
  const auto shard = static_cast<std::size_t>(counts_[local_]);
  const std::size_t ks = ks_[local_];
  shard_.assign(shard, 0.0f);
  order_.assign(shard, 0);
  sel_.assign(ks, SparsePair{0, 0.0f});
  rail_.assign(nodes_ * ks, SparsePair{0, 0.0f});
  sum_.assign(share_pairs_ ? 0 : shard, 0.0f);
  node_pairs_.assign(share_pairs_ ? pairs : 0, SparsePair{0, 0.0f});
  // Bytes that leave this rank and arrive at it, each step (the reduce-scatter: the other
  // shards out, this shard from the G - 1 others).
  const std::size_t pair = sizeof(SparsePair), fl = sizeof(float);
  sent_ = (numel_ - shard) * fl + (nodes_ > 1 ? ks * pair : 0) +
          (G > 1 ? (share_pairs_ ? rail_.size() * pair : shard * fl) : 0);
  received_ = (G - 1) * shard * fl + (nodes_ - 1) * ks * pair +
              (share_pairs_ ? (pairs - rail_.size()) * pair : (numel_ - shard) * fl);
}

int SparseNode::advance(GroupState& /*s*/, bool& done) noexcept {
  done = false;
  for (;;) {
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) return MPI_SUCCESS;
    if (host_done_ < step_) {  // once per step, even while the next one waits its turn
      if (step_ == 1) select();
      if (step_ == 2) sum_shard();
      if (step_ == 3) finish();
      host_done_ = step_;
    }
    if (step_ == 3) {
      done = true;
      return MPI_SUCCESS;
    }
    const NodeComms::Step next = step_ == 1 ? NodeComms::rail_step : NodeComms::gather_step;
    if (!node_->may_post(next, seq_)) return MPI_SUCCESS;  // an earlier exchange's turn
    const int prc = step_ == 1 ? post_rail() : post_share();
    if (prc != MPI_SUCCESS) return prc;
    node_->posted(next);
    ++step_;
  }
}

/// The shard's k_i largest |values| (ties to the lower index) into sel_, sorted by index;
/// shard_ keeps the rest. A non-finite shard sends NaN pairs and keeps nothing.
void SparseNode::select() noexcept {
  const std::size_t ks = sel_.size();
  if (ks == 0) return;
  const bool finite =
      std::all_of(shard_.begin(), shard_.end(), [](float v) { return std::isfinite(v); });
  if (!finite) {
    std::fill(sel_.begin(), sel_.end(), SparsePair{0, std::nanf("")});
    return;
  }
  std::iota(order_.begin(), order_.end(), std::uint32_t{0});
  const float* x = shard_.data();
  const auto larger = [x](std::uint32_t a, std::uint32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  const auto kth = order_.begin() + static_cast<std::ptrdiff_t>(ks);
  if (ks < order_.size()) std::nth_element(order_.begin(), kth - 1, order_.end(), larger);
  std::sort(order_.begin(), kth);
  for (std::size_t j = 0; j < ks; ++j) {
    const std::uint32_t i = order_[j];
    sel_[j] = SparsePair{i, shard_[i]};
    shard_[i] = 0.0f;
  }
}

/// The dense share: every node's pairs of this shard summed, in rail order (the same sum,
/// bit for bit, on every rank of the rail).
void SparseNode::sum_shard() noexcept {
  if (share_pairs_) return;  // the node sums the pairs itself
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (const SparsePair& p : rail_) sum_[p.index] += p.value;
}

/// dense_recv complete (the pair share scattered into it); node_residual written where the
/// sum is finite, which every rank decides alike (every rank holds the same sum).
void SparseNode::finish() noexcept {
  float* recv = buffers_.mpi_recv();
  if (share_pairs_) {
    std::fill(recv, recv + numel_, 0.0f);
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      float* shard = recv + displs_[i];
      const SparsePair* p = node_pairs_.data() + pair_displs_[i];
      for (int j = 0; j < pair_counts_[i]; ++j) shard[p[j].index] += p[j].value;
    }
  }
  kept_ = std::all_of(recv, recv + numel_, [](float v) { return std::isfinite(v); });
  if (!kept_) return;
  float* keep = resid_.mpi_recv();
  std::fill(keep, keep + numel_, 0.0f);
  std::copy(shard_.begin(), shard_.end(), keep + displs_[local_]);
}

}  // namespace

std::unique_ptr<Wire> sparse_node_wire(const GroupBuffers& b) {
  // k is the group's (checked at set-up); a blocking form has no meaning here (four steps).
  GroupBuffers dense = b;
  dense.k = 0;
  refuse_stray_fields(dense, dense_fields | sparse_node_fields);
  if (b.blocking_allreduce)
    throw Error("GroupBuffers::kind is sparse_node but blocking_allreduce is set");
  return std::make_unique<SparseNode>(b);
}

}  // namespace omgs::detail
