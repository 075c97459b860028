// The two-level dense wire (WireKind::allreduce_node): every rank's floats summed on every
// rank in three non-blocking steps, as hierarchical allreduces do (Horovod, NCCL's trees over
// nodes): MPI_Ireduce_scatter of the group inside the node (rank i of the node gets shard i of
// the node's sum; shards differ by at most one element when G does not divide n), MPI_Iallreduce
// of the shard across nodes on the rail (the ranks with the same local index), MPI_Iallgatherv
// of the shards inside the node. Only the middle step crosses the fabric, with n / G elements
// per rank. It is phased: post() starts the first step, and the driver advances it beside
// MPI_Testsome. The steps run on the engine's node and rail communicators (NodeComms), shared
// by every group: a step is posted only after the same step of every earlier exchange, so each
// communicator sees one order on every rank. It runs on host buffers; device buffers are staged.
#include <climits>
#include <cstdio>
#include <vector>

#include "comm/engine_impl.hpp"
#include "comm/node_comms.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"

namespace omgs::detail {

namespace {

// extent(): a two-level group is told apart from a flat dense group of the same size.
constexpr std::uint64_t allreduce_node_tag = std::uint64_t{1} << 61;

class AllreduceNode final : public Wire {
 public:
  explicit AllreduceNode(const GroupBuffers& b)
      : buffers_(b.dense_send, b.dense_recv), numel_(b.dense_numel), stray_k_(b.k) {}

  std::string check(int g, const WireSetup& setup) const override {
    const std::string group = "group " + std::to_string(g) + ": ";
    if (!setup.unequal_nodes.empty())
      return group + "a two-level allreduce: " + setup.unequal_nodes;
    if (numel_ > static_cast<std::size_t>(INT_MAX))
      return group + "dense_numel = " + std::to_string(numel_) +
             " floats overflows MPI's int count";
    if (stray_k_ != 0 || buffers_.send() == nullptr || buffers_.recv() == nullptr)
      return group + "a two-level dense group needs k = 0 and non-null dense_send and dense_recv";
    return "";
  }
  std::size_t k() const noexcept override { return stray_k_; }
  std::uint64_t extent() const noexcept override { return allreduce_node_tag | numel_; }
  bool exchanges_counts() const noexcept override { return false; }
  bool host_only() const noexcept override { return true; }  // the shard is a host buffer
  bool phased() const noexcept override { return true; }

  void init(const WireContext& ctx, bool staging, int /*ranks*/) override {
    node_ = ctx.node;
    const auto G = static_cast<std::size_t>(node_->ranks_per_node());
    counts_.assign(G, 0);
    displs_.assign(G, 0);
    for (std::size_t i = 0; i < G; ++i) {
      counts_[i] = static_cast<int>(numel_ / G + (i < numel_ % G ? 1 : 0));
      displs_[i] = i == 0 ? 0 : displs_[i - 1] + counts_[i - 1];
    }
    shard_.assign(static_cast<std::size_t>(counts_[static_cast<std::size_t>(node_->local_rank())]),
                  0.0f);
    buffers_.init(staging, numel_, numel_);
  }
  void stage_out(const CopyFunction& to_host, std::size_t /*count*/) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept override {
    if (!s.failed) buffers_.stage_in(to_device, numel_);
  }
  int post(const WireContext& /*ctx*/, const GroupState& /*s*/,
           MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    seq_ = node_->next_start();
    step_ = 1;
    const int rc = MPI_Ireduce_scatter(buffers_.mpi_send(), shard_.data(), counts_.data(),
                                       MPI_FLOAT, MPI_SUM, node_->node(), &req_);
    if (rc == MPI_SUCCESS) node_->started();
    return rc;
  }
  int advance(GroupState& /*s*/, bool& done) noexcept override {
    done = false;
    for (;;) {
      int flag = 0;
      const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return rc;
      if (!flag) return MPI_SUCCESS;
      if (step_ == 3) {
        done = true;
        return MPI_SUCCESS;
      }
      const NodeComms::Step next = step_ == 1 ? NodeComms::rail_step : NodeComms::gather_step;
      if (!node_->may_post(next, seq_)) return MPI_SUCCESS;  // an earlier exchange's turn
      const int prc = step_ == 1 ? post_rail() : post_gather();
      if (prc != MPI_SUCCESS) return prc;
      node_->posted(next);
      ++step_;
    }
  }
  // The dense wire's convention: the group's floats, each way (GroupStats).
  std::uint64_t bytes_sent(const GroupState& /*s*/) const noexcept override { return bytes(); }
  std::uint64_t bytes_received(const GroupState& /*s*/) const noexcept override { return bytes(); }

 private:
  std::uint64_t bytes() const noexcept { return numel_ * sizeof(float); }
  int post_rail() noexcept {
    return MPI_Iallreduce(MPI_IN_PLACE, shard_.data(), static_cast<int>(shard_.size()), MPI_FLOAT,
                          MPI_SUM, node_->rail(), &req_);
  }
  int post_gather() noexcept {
    return MPI_Iallgatherv(shard_.data(), static_cast<int>(shard_.size()), MPI_FLOAT,
                           buffers_.mpi_recv(), counts_.data(), displs_.data(), MPI_FLOAT,
                           node_->node_gather(), &req_);
  }

  StagedBuffers<float> buffers_;
  std::size_t numel_;
  std::size_t stray_k_;  // must be 0 (check): a dense group submits no pairs
  NodeComms* node_ = nullptr;
  std::vector<int> counts_, displs_;  // each local rank's shard of the group
  std::vector<float> shard_;          // this rank's shard: the node's sum, then everyone's
  // [P] the exchange in flight: its number among the two-level exchanges, its step (1
  // reduce-scatter, 2 rail allreduce, 3 allgather) and that step's request.
  std::uint64_t seq_ = 0;
  int step_ = 0;
  MPI_Request req_ = MPI_REQUEST_NULL;
};

}  // namespace

std::unique_ptr<Wire> allreduce_node_wire(const GroupBuffers& b) {
  // k is the group's own check (it must be 0): the other pair fields are stray. A blocking
  // form has no meaning here (three steps).
  GroupBuffers dense = b;
  dense.k = 0;
  refuse_stray_fields(dense, dense_fields);
  if (b.blocking_allreduce)
    throw Error("GroupBuffers::kind is allreduce_node but blocking_allreduce is set");
  return std::make_unique<AllreduceNode>(b);
}

}  // namespace omgs::detail
