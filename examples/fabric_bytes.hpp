// The bytes a job sends across the fabric, read from the kernel's interface counters: every
// network namespace of the job (a host of scripts/cluster.sh, a machine of a real cluster)
// counts once the bytes its interfaces other than loopback transmitted. Ranks of one host
// talk through shared memory, which no interface counts, so the difference of two samples is
// what crossed between hosts: TCP/IP headers and acknowledgements included, and everything
// the host sent meanwhile. Meaningful where MPI runs over the kernel's TCP (the emulated
// cluster); an RDMA fabric bypasses these counters.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace omgs_examples {

/// This process's network namespace's bytes transmitted by its interfaces other than "lo"
/// (/proc/self/net/dev); `ok` false (and 0) where the file cannot be read or parsed.
std::uint64_t interface_tx_bytes(bool& ok);

/// Which ranks of `comm` share a network namespace (same host name and namespace inode), so
/// that each namespace's counter is counted by one rank.
class FabricCounter {
 public:
  /// Collective over comm.
  explicit FabricCounter(MPI_Comm comm);

  /// Whether the job spans several network namespaces and every one's counter is readable:
  /// only then is there a fabric to count.
  bool measurable() const { return measurable_; }
  /// The network namespaces (hosts) of the job.
  int hosts() const { return hosts_; }
  /// Collective: the bytes every namespace has transmitted so far, summed (0 when not
  /// measurable).
  double sample() const;

 private:
  MPI_Comm comm_;
  bool counts_ = false;  // this rank is its namespace's first
  bool measurable_ = false;
  int hosts_ = 1;
};

}  // namespace omgs_examples
