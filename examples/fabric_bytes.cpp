#include "fabric_bytes.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "bounded_mpi.hpp"

namespace omgs_examples {

std::uint64_t interface_tx_bytes(bool& ok) {
  ok = false;
  std::ifstream in("/proc/self/net/dev");
  std::string line;
  std::uint64_t total = 0;
  int lines = 0;
  while (std::getline(in, line)) {
    if (++lines <= 2) continue;  // the two header lines
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) return 0;
    std::istringstream name(line.substr(0, colon));
    std::string interface;
    name >> interface;
    std::istringstream fields(line.substr(colon + 1));
    std::uint64_t v[9] = {};
    for (std::uint64_t& f : v)
      if (!(fields >> f)) return 0;
    if (interface != "lo") total += v[8];  // receive: 8 fields, then transmit's bytes
  }
  ok = lines > 2;
  return ok ? total : 0;
}

namespace {

/// This process's host name and network namespace, hashed.
std::uint64_t namespace_key() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  struct stat st {};
  const unsigned long long inode =
      stat("/proc/self/ns/net", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0ULL;
  // 63 bits: MPICH 4.0.2's MPI_MAX on MPI_UNSIGNED_LONG_LONG (the gather below) returned 0
  // for keys with the top bit set, as if it compared them signed (one namespace seen).
  return std::hash<std::string>{}(std::string(host) + "/" + std::to_string(inode)) >> 1;
}

}  // namespace

FabricCounter::FabricCounter(MPI_Comm comm) : comm_(comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Every rank's key in its slot, the others 0: the maximum gathers them (bounded).
  std::vector<unsigned long long> mine(static_cast<std::size_t>(size), 0ULL), keys(mine.size());
  mine[static_cast<std::size_t>(rank)] = namespace_key();
  allreduce_or_abort(mine.data(), keys.data(), size, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm,
                     "the network namespaces' gather");
  counts_ = true;
  hosts_ = 0;
  for (int r = 0; r < size; ++r) {
    bool first = true;
    for (int q = 0; q < r; ++q) first = first && keys[q] != keys[r];
    if (first) ++hosts_;
    if (r == rank) counts_ = first;
  }
  bool ok = false;
  (void)interface_tx_bytes(ok);
  int readable = ok ? 1 : 0, all = 0;
  allreduce_or_abort(&readable, &all, 1, MPI_INT, MPI_MIN, comm, "the interface counters' check");
  measurable_ = hosts_ > 1 && all == 1;
}

double FabricCounter::sample() const {
  if (!measurable_) return 0.0;
  bool ok = false;
  const double mine = counts_ ? static_cast<double>(interface_tx_bytes(ok)) : 0.0;
  double sum = 0.0;
  allreduce_or_abort(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_, "the interface counters' sum");
  return sum;
}

}  // namespace omgs_examples
