// The node and rail communicators of the two-level wires (node_comms.hpp).
#include "comm/node_comms.hpp"

#include <vector>

#include <omgs/error.hpp>

#include "comm/collectives.hpp"

namespace omgs::detail {

namespace {

constexpr const char* who = "omgs::ProgressEngine";

/// This rank's verdict on the ranks-per-node option, then agreement on the value itself.
void check_ranks_per_node(MPI_Comm comm, int ranks, int g) {
  std::string err;
  if (g < 0)
    err = "ranks_per_node = " + std::to_string(g) + " is negative (0: found by shared memory)";
  else if (g > 0 && ranks % g != 0)
    err = "ranks_per_node = " + std::to_string(g) + " does not divide the " +
          std::to_string(ranks) + " ranks (nodes of unequal size are not supported)";
  agree_on_error(comm, err.empty() ? "" : std::string(who) + ": " + err, who);
  std::vector<std::uint64_t> mx, mn;
  max_min(comm, {static_cast<std::uint64_t>(g)}, mx, mn);
  if (mx[0] != mn[0])
    throw Error(std::string(who) + ": ranks disagree on ranks_per_node (OMGS_RANKS_PER_NODE): " +
                std::to_string(mn[0]) + " to " + std::to_string(mx[0]) + "; this rank has " +
                std::to_string(g));
}

void set_errors_return(MPI_Comm c) {
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
}

}  // namespace

NodeComms::NodeComms(MPI_Comm comm, int ranks_per_node) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  check_ranks_per_node(comm, ranks, ranks_per_node);
  if (ranks_per_node > 0)
    MPI_Comm_split(comm, rank / ranks_per_node, rank, &node_);
  else
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_);
  int size = 1;
  MPI_Comm_rank(node_, &local_rank_);
  MPI_Comm_size(node_, &size);
  std::vector<std::uint64_t> mx, mn;
  max_min(comm, {static_cast<std::uint64_t>(size)}, mx, mn);
  ranks_per_node_ = size;
  nodes_ = ranks / size;
  if (mx[0] != mn[0] || ranks % size != 0)
    unequal_ = "the nodes found by MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) have " +
               std::to_string(mn[0]) + " to " + std::to_string(mx[0]) + " of the " +
               std::to_string(ranks) +
               " ranks (nodes of unequal size are not supported; set OMGS_RANKS_PER_NODE to a "
               "divisor of the ranks to emulate equal nodes)";
  MPI_Comm_dup(node_, &node_gather_);
  MPI_Comm_split(comm, local_rank_, rank, &rail_);
  for (MPI_Comm c : {node_, node_gather_, rail_}) set_errors_return(c);
}

NodeComms::~NodeComms() {
  if (mpi_finalized()) return;
  for (MPI_Comm* c : {&node_, &node_gather_, &rail_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

}  // namespace omgs::detail
