// Which ranks share this rank's machine (machine_ranks.hpp).
#include "comm/machine_ranks.hpp"

#include <fstream>
#include <iterator>
#include <vector>

namespace omgs::detail {

std::uint64_t machine_key(const std::string& boot_id_path) {
  std::ifstream in(boot_id_path);
  if (!in.is_open()) return 0;
  const std::string id((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  bool any = false;
  for (char c : id) {
    if (c == '\n' || c == ' ') continue;
    any = true;
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  if (!any) return 0;
  return h == 0 ? 1 : h;  // 0 means "no key"
}

MachineRanks shared_memory_ranks(MPI_Comm comm) {
  MachineRanks out;
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_rank(node, &out.index);
    MPI_Comm_size(node, &out.count);
    MPI_Comm_free(&node);
  }
  return out;
}

MachineRanks machine_ranks(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::uint64_t mine = machine_key();
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, comm);
  MachineRanks out;
  out.count = 0;
  for (int r = 0; r < size; ++r) {
    const std::uint64_t k = keys[static_cast<std::size_t>(r)];
    if (k == 0)
      return shared_memory_ranks(comm);  // every rank sees the same keys: all take this path
    if (k != mine) continue;
    if (r < rank) ++out.index;
    ++out.count;
  }
  return out;
}

}  // namespace omgs::detail
