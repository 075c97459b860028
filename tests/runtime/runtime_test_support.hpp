// Helpers shared by the runtime tests.
#pragma once

#include "mpi_world.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

namespace omgs_test {

inline std::vector<float> to_host(const omgs::ConstGradientView& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<float>(h.data(), h.data() + h.extent(0));
}

/// Copies host values into a device view (e.g. the runtime's gradient slot).
inline void copy_to(const omgs::GradientView& dst, const std::vector<float>& src) {
  Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(
      src.data(), src.size());
  Kokkos::deep_copy(dst, h);
}

/// Fills layer l's gradient with normal random values (also returned in `out`).
inline void fill_gradient(omgs::Runtime& rt, std::size_t l, std::mt19937& rng,
                          std::vector<float>& out) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  out.resize(rt.layers()[l].numel);
  for (float& x : out) x = nd(rng);
  copy_to(rt.gradient(l), out);
}

/// Busy-waits (a stand-in for a layer's backward computation).
inline void spin_for(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace omgs_test
