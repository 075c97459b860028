// Test data of the sparse allreduce's tests (test_sparse_allreduce.cpp,
// test_sparse_allreduce_wire.cpp): random distinct pairs, and every rank's pairs gathered.
#pragma once

#include <omgs/comm.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "mpi_world.hpp"

namespace omgs_test {

/// `count` distinct indices in [lo, hi) with normal values, from a seed of its own, in a
/// shuffled order (SparseAllreduce::start() takes any order).
inline std::vector<omgs::SparsePair> random_pairs(std::size_t count, std::uint32_t lo,
                                                  std::uint32_t hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::uint32_t> idx(lo, hi - 1);
  std::normal_distribution<float> val(0.0f, 1.0f);
  std::map<std::uint32_t, float> m;
  while (m.size() < std::min<std::size_t>(count, hi - lo)) m[idx(gen)] = val(gen);
  std::vector<omgs::SparsePair> out;
  for (const auto& [i, v] : m) out.push_back({i, v});
  std::shuffle(out.begin(), out.end(), gen);
  return out;
}

/// Collective: whether, summed over ranks per index in double, the dropped pairs plus the
/// survivors equal the pairs every rank sent (`mine`, indices below n): no mass lost or made
/// (exact where every value and rounding error is exact in double).
inline bool survivors_and_dropped_are_the_pairs(const std::vector<omgs::SparsePair>& survivors,
                                                const std::vector<omgs::SparsePair>& dropped,
                                                const std::vector<omgs::SparsePair>& mine,
                                                std::size_t n) {
  std::vector<double> back(n, 0.0), pairs(n, 0.0);
  for (const omgs::SparsePair& q : dropped) back[q.index] = q.value;
  for (const omgs::SparsePair& q : mine) pairs[q.index] = q.value;
  MPI_Allreduce(MPI_IN_PLACE, back.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, pairs.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  for (const omgs::SparsePair& q : survivors) back[q.index] += q.value;
  return back == pairs;
}

/// Every rank's pairs, in rank order, on every rank.
inline std::vector<omgs::SparsePair> all_pairs(const std::vector<omgs::SparsePair>& mine) {
  const int p = world_size();
  int n = static_cast<int>(mine.size() * sizeof(omgs::SparsePair));
  std::vector<int> counts(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p), 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 1; r < p; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<omgs::SparsePair> out(static_cast<std::size_t>(displs[p - 1] + counts[p - 1]) /
                                    sizeof(omgs::SparsePair));
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  return out;
}

/// 1 on every rank when `got` equals rank 0's, bit for bit.
inline int same_on_every_rank(const std::vector<omgs::SparsePair>& got) {
  std::vector<omgs::SparsePair> root = got;
  std::uint64_t n0 = root.size();
  MPI_Bcast(&n0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  root.resize(n0);
  MPI_Bcast(root.data(), static_cast<int>(n0 * sizeof(omgs::SparsePair)), MPI_BYTE, 0,
            MPI_COMM_WORLD);
  int same = n0 == got.size() &&
             std::equal(root.begin(), root.end(), got.begin(), [](const auto& a, const auto& b) {
               return a.index == b.index && a.value == b.value;
             });
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same;
}

}  // namespace omgs_test
