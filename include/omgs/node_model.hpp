// Module plan, node shapes: G ranks per node joined by an intra-node link, and the model that
// predicts the two-level collectives (Collective::allreduce_node, Collective::sparse_node)
// from a flat fabric model and that link (omgs-plan --ranks-per-node; docs/planner.md, "Node
// shapes"). Pure C++17: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <omgs/export.hpp>
#include <omgs/perf_model.hpp>

namespace omgs {

/// G ranks per node (consecutive ranks, as MPI_Comm_split_type groups them) joined by an
/// intra-node link: its latency per step and the seconds per byte one rank receives on it
/// (one GPU's share of NVLink, Infinity Fabric or Xe Link, one direction).
struct NodeShape {
  int ranks_per_node = 1;
  AlphaBeta link;
};

/// The "node_link" member {"alpha_s": ..., "beta_s_per_byte": ...} of a fabric file
/// (examples/perf/*.json). Throws omgs::Error naming the file when it cannot be read, has no
/// such member, or a coefficient is missing, negative or not finite.
OMGS_EXPORT AlphaBeta load_node_link(const std::string& path);

/// Throws omgs::Error unless ranks_per_node >= 1 divides `workers` and the link's
/// coefficients are finite and >= 0 (the message names G and P).
OMGS_EXPORT void check_node_shape(const NodeShape& shape, int workers);

/// A flat fabric model with a node shape. Every collective is the fabric model's but the two
/// two-level lines, which it derives (N = P / G nodes, s = ceil(n / G) elements per shard,
/// e the fabric's bytes per dense element, k_s = selected_count(s, density) pairs of
/// pair_bytes, L the link):
///   allreduce_node = 2 [(G - 1) L.alpha + (G - 1) / G e n L.beta]      (node reduce-scatter
///                    + fabric.allreduce_s(s, N)                         and allgather)
///   sparse_node    = (G - 1) L.alpha + (G - 1) / G 4 n L.beta           (node reduce-scatter)
///                    + fabric.topk_s(s) + fabric.allgather_s(s, N, d)   (the shard's pairs)
///                    + (G - 1) L.alpha + (G - 1) min(N k_s pair_bytes, 4 s) L.beta  (shared)
/// The sparse node-summed row has no top-k on the compute stream (its selection runs in the
/// exchange), so the shard's top-k is in its line. At G = 1 allreduce_node is the fabric's
/// allreduce exactly. Both are known where G divides P and the fabric knows the rail's
/// collective among N ranks.
class OMGS_EXPORT NodeModel final : public PerfModel {
 public:
  /// Throws omgs::Error for ranks_per_node < 1 or a bad link (check_node_shape).
  NodeModel(AlphaBetaModel fabric, NodeShape shape);

  double topk_s(std::uint64_t numel) const override;
  double allgather_s(std::uint64_t numel, int workers, double density) const override;
  void check_workers(int workers) const override;
  std::string describe() const override;
  bool knows_collective(std::string_view name, int workers) const override;
  double collective_s(std::string_view name, std::uint64_t numel, int workers,
                      double density) const override;
  bool knows_allreduce(int workers) const override;
  double allreduce_s(std::uint64_t numel, int workers) const override;
  bool knows_sparse_allreduce(int workers) const override;
  double sparse_allreduce_s(std::uint64_t numel, int workers, double density) const override;

  /// The two-level lines above; throw omgs::Error where G does not divide P.
  double allreduce_node_s(std::uint64_t numel, int workers) const;
  double sparse_node_s(std::uint64_t numel, int workers, double density) const;

  const AlphaBetaModel& fabric() const { return fabric_; }
  const NodeShape& shape() const { return shape_; }

 private:
  AlphaBetaModel fabric_;
  NodeShape shape_;
};

}  // namespace omgs
