// Test data of the ProgressEngine tests (test_comm.cpp, test_comm_setup.cpp): per-group
// send/receive storage, the pairs every rank sends (a function of rank, group, iteration,
// entry) and the check of what arrived; staging through host mirrors without a GPU.
#pragma once

#include <omgs/comm.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mpi_world.hpp"

namespace omgs_test_comm {

using omgs::GroupBuffers;
using omgs::ProgressEngine;
using omgs::ProgressOptions;
using omgs::SparsePair;
using omgs::SubmitStatus;
using omgs::WaitStatus;

using omgs_test::world_rank;
using omgs_test::world_size;

/// The copies staging made, each way.
struct CopyCounts {
  int to_host = 0, to_device = 0;
};

/// "Device" buffers (host memory here: no GPU) without GPU-aware MPI, so that every group
/// goes through its host mirrors; the copy functions count the copies into `c`.
inline void stage_through_host(ProgressOptions& o, CopyCounts& c) {
  o.buffer_space = omgs::MemorySpace::device;
  o.gpu_aware = omgs::GpuAwareMpi::no;
  o.copy_to_host = [&c](void* d, const void* s, std::size_t n) {
    ++c.to_host;
    std::memcpy(d, s, n);
  };
  o.copy_to_device = [&c](void* d, const void* s, std::size_t n) {
    ++c.to_device;
    std::memcpy(d, s, n);
  };
}

/// Send/receive storage for a set of groups.
struct Buffers {
  std::vector<std::vector<SparsePair>> send, recv;
  std::vector<GroupBuffers> groups;
  Buffers(const std::vector<std::size_t>& ks, int P) {
    for (std::size_t k : ks) {
      send.emplace_back(k);
      recv.emplace_back(k * static_cast<std::size_t>(P));
    }
    for (std::size_t g = 0; g < ks.size(); ++g) {
      groups.push_back({send[g].data(), recv[g].data(), ks[g]});
    }
  }
};

inline std::uint32_t index_of(int rank, int g, int iter, std::size_t i) {
  return static_cast<std::uint32_t>(rank * 1000003 + g * 7919 + iter * 31 + static_cast<int>(i));
}
inline float value_of(int rank, int g, int iter, std::size_t i) {
  return static_cast<float>(rank) + 0.25f * static_cast<float>(g) +
         0.001f * static_cast<float>(iter % 100) + 1e-6f * static_cast<float>(i % 1000);
}

inline void fill(Buffers& b, int g, int iter, std::size_t count) {
  const int r = world_rank();
  for (std::size_t i = 0; i < count; ++i) {
    b.send[static_cast<std::size_t>(g)][i] = {index_of(r, g, iter, i), value_of(r, g, iter, i)};
  }
}

/// Number of wrong pairs in group g's receive buffer (fixed or variable counts).
inline long check(const Buffers& b, const ProgressEngine& e, int g, int iter,
                  const std::vector<std::size_t>& counts_by_rank) {
  long bad = 0;
  const std::uint64_t* counts = e.recv_counts(g);
  const std::uint64_t* displs = e.recv_displs(g);
  std::size_t total = 0;
  for (int r = 0; r < world_size(); ++r) {
    const auto c = counts_by_rank[static_cast<std::size_t>(r)];
    if (counts[r] != c || displs[r] != total) ++bad;
    for (std::size_t i = 0; i < c; ++i) {
      const SparsePair& p = b.recv[static_cast<std::size_t>(g)][total + i];
      if (p.index != index_of(r, g, iter, i) || p.value != value_of(r, g, iter, i)) ++bad;
    }
    total += c;
  }
  if (e.recv_total(g) != total) ++bad;
  return bad;
}

/// A dense group's value on `rank` for group g, iteration iter, element i: small multiples
/// of 1/4, so that the tests' sums over ranks are exact in any order.
inline float exact_dense_value(int rank, int g, int iter, std::size_t i) {
  return float(rank + 1) * 0.5f + float(g) + 0.25f * float(iter) + float(i % 7);
}

inline std::vector<std::size_t> fixed_counts(std::size_t k) {
  return std::vector<std::size_t>(static_cast<std::size_t>(world_size()), k);
}

inline ProgressOptions quiet_options() {
  ProgressOptions o;
  o.read_environment = false;
  o.wait_timeout_s = 60;
  o.shutdown_timeout_s = 30;
  return o;
}

inline const std::vector<std::size_t> kKs = {1, 3, 17, 0, 100, 1000, 5, 4096, 2, 64, 333, 8};

}  // namespace omgs_test_comm
