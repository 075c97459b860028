// Internal: which ranks of a communicator share this rank's machine, and so its cores.
// MPI's shared-memory split (MPI_COMM_TYPE_SHARED) groups ranks by what the MPI calls a node;
// ranks in separate network namespaces of one machine (scripts/cluster.sh's emulated hosts)
// or in containers on one machine are separate nodes to it, yet they run on the same
// kernel's cores. The layout's oversubscription test (layout.hpp) needs the cores' sharers:
// with the node's count, 4 to 16 emulated hosts on 2 cores looked like 1 rank each, and
// their waits spun (docs/model-check.md).
#pragma once

#include <cstdint>
#include <string>

#include <mpi.h>

#include <omgs/export.hpp>

namespace omgs::detail {

struct MachineRanks {
  int index = 0;  ///< this rank's index among them (by rank in the communicator)
  int count = 1;  ///< the ranks of the communicator on this machine, >= 1
};

/// A 64-bit key of the running kernel: FNV-1a of /proc/sys/kernel/random/boot_id (new at
/// every boot, the same in every namespace and container of the machine); 0 where it cannot
/// be read.
OMGS_EXPORT std::uint64_t machine_key(
    const std::string& boot_id_path = "/proc/sys/kernel/random/boot_id");

/// Collective: the ranks of `comm` on this rank's node as MPI's shared-memory split
/// (MPI_COMM_TYPE_SHARED) groups them; this rank alone where the split fails.
MachineRanks shared_memory_ranks(MPI_Comm comm);

/// Collective: the ranks of `comm` whose machine_key is this rank's. Where some rank has no
/// key, shared_memory_ranks instead (its node).
OMGS_EXPORT MachineRanks machine_ranks(MPI_Comm comm);

}  // namespace omgs::detail
