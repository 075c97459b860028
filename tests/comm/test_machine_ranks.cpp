// Which ranks share this machine (src/comm/machine_ranks.hpp): the kernel's key, the ranks
// counted on it, and the layouts built on that count. Run by mpiexec on one machine and by
// scripts/cluster.sh on emulated hosts (tests/cluster), where MPI's shared-memory split
// sees one rank per host but every rank runs on this machine's cores.
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include <sched.h>
#include <unistd.h>

#include "comm/collectives.hpp"
#include "comm/machine_ranks.hpp"
#include "mpi_world.hpp"
#include "omgs_catch.hpp"

using omgs::detail::machine_key;
using omgs::detail::machine_ranks;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {
int node_size() {  // MPI's shared-memory split, what the layout counted before
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

std::string written(const std::string& text) {
  const std::string path = "/tmp/omgs_test_boot_id." + std::to_string(getpid());
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("machine_key: the boot id's key, 0 where there is none", "[comm][layout]") {
  const std::string a = written("0c0ff2e6-5d1b-4c2a-9a43-1f2e3d4c5b6a\n");
  const std::uint64_t ka = machine_key(a);
  CHECK(ka != 0);
  CHECK(machine_key(a) == ka);
  CHECK(machine_key(written("0c0ff2e6-5d1b-4c2a-9a43-1f2e3d4c5b6b\n")) != ka);
  CHECK(machine_key(written("")) == 0);
  CHECK(machine_key(written("\n")) == 0);
  CHECK(machine_key("/nonexistent/omgs/boot_id") == 0);
  std::remove(a.c_str());
  // This machine's: Linux has one, the same for every rank of this run.
  const std::uint64_t here = machine_key();
  CHECK(here != 0);
  std::uint64_t all_and = here, all_or = here;  // both equal to it only if every rank's is
  MPI_Allreduce(MPI_IN_PLACE, &all_and, 1, MPI_UINT64_T, MPI_BAND, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &all_or, 1, MPI_UINT64_T, MPI_BOR, MPI_COMM_WORLD);
  CHECK(all_and == here);
  CHECK(all_or == here);
}

TEST_CASE("machine_ranks: every rank of this run shares this machine", "[comm][layout]") {
  const omgs::detail::MachineRanks m = machine_ranks(MPI_COMM_WORLD);
  CHECK(m.count == world_size());
  CHECK(m.index == world_rank());
  // At least MPI's node: on emulated hosts MPI sees fewer (one rank per host).
  CHECK(m.count >= node_size());
  // A split: the even ranks and the odd ones, each counted among its own.
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half);
  const omgs::detail::MachineRanks h = machine_ranks(half);
  CHECK(h.count == (world_size() + 1 - world_rank() % 2) / 2);
  CHECK(h.index == world_rank() / 2);
  MPI_Comm_free(&half);
}

TEST_CASE("progress_idle counts every rank on the machine's cores", "[comm][layout]") {
  // Unbound ranks (affinity = every online PU) with one compute thread and a progress thread
  // each: more threads than PUs is oversubscribed whatever the core count, and then the
  // waits sleep at once. On 4 emulated hosts on 2 cores MPI's node is 1 rank: 2 threads.
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool got = sched_getaffinity(0, sizeof(set), &set) == 0;
  const long pus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool unbound = got && pus > 0 && CPU_COUNT(&set) == pus;
  const omgs::IdleOptions idle = omgs::detail::progress_idle(MPI_COMM_WORLD, 1);
  const bool sleeps = idle.spin_iterations == 0 && idle.yield_iterations == 0;
  if (unbound && 2 * world_size() > pus) CHECK(sleeps);
  CHECK((sleeps || idle.spin_iterations == std::numeric_limits<int>::max()));
}
