// Internal: the node of each rank, for the two-level wires (WireKind::allreduce_node): the
// ranks of a node (found by MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), or node = rank / G
// with ProgressOptions::ranks_per_node = G to emulate nodes on one machine), and the "rail"
// of each local index (the ranks with the same index on every node). Made once per engine,
// shared by every group's wire (docs/comm.md, "Two levels").
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace omgs::detail {

class NodeComms {
 public:
  /// Collective over `comm`: ranks_per_node > 0 splits by rank / ranks_per_node, 0 by
  /// shared memory. Throws omgs::Error on every rank if the ranks give different values,
  /// a value is negative, or it does not divide the ranks. Nodes of unequal size found by
  /// shared memory are not an error here (the engine may have no two-level group):
  /// unequal() says why, and a two-level wire refuses to set up.
  NodeComms(MPI_Comm comm, int ranks_per_node);
  ~NodeComms();
  NodeComms(const NodeComms&) = delete;
  NodeComms& operator=(const NodeComms&) = delete;

  /// The node's ranks for the reduce-scatter, a duplicate for the allgather, and the rail.
  /// Each step kind has a communicator of its own, so that the steps of consecutive groups,
  /// posted as earlier steps complete, never meet on one communicator in different orders.
  MPI_Comm node() const noexcept { return node_; }
  MPI_Comm node_gather() const noexcept { return node_gather_; }
  MPI_Comm rail() const noexcept { return rail_; }
  int local_rank() const noexcept { return local_rank_; }
  int ranks_per_node() const noexcept { return ranks_per_node_; }
  int nodes() const noexcept { return nodes_; }
  /// "" when every node has ranks_per_node() ranks; else what differs.
  const std::string& unequal() const noexcept { return unequal_; }

  /// [P] The order of the steps on the rail and node_gather communicators: every rank starts
  /// the two-level exchanges in plan order and numbers them (next_start, then started once
  /// the first step is posted: a refused post is retried with the same number); a wire posts
  /// its rail step, then its gather step, only when every earlier exchange has posted its own
  /// (may_post / posted), so each communicator sees one order on every rank.
  enum Step { rail_step = 0, gather_step = 1 };
  std::uint64_t next_start() const noexcept { return started_; }
  void started() noexcept { ++started_; }
  bool may_post(Step step, std::uint64_t seq) const noexcept { return posted_[step] == seq; }
  void posted(Step step) noexcept { ++posted_[step]; }

 private:
  MPI_Comm node_ = MPI_COMM_NULL, node_gather_ = MPI_COMM_NULL, rail_ = MPI_COMM_NULL;
  int local_rank_ = 0, ranks_per_node_ = 1, nodes_ = 1;
  std::string unequal_;
  std::uint64_t started_ = 0;
  std::uint64_t posted_[2] = {0, 0};
};

}  // namespace omgs::detail
