// The dense runtime tests' gradients (test_dense_groups.cpp, test_node_groups.cpp): a value
// known on every rank per (rank, iteration, layer, element), written into every layer, and a
// backward pass that marks every layer ready.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

namespace omgs_test {

inline float dense_value(int rank, int it, std::size_t l, std::size_t i) {
  return std::sin(0.37f * float(i) + 1.3f * float(rank) + 0.7f * float(it) + float(l));
}

/// Every layer's gradient of this rank at iteration `it` (dense_value).
inline void fill_dense(omgs::Runtime& rt, int it) {
  for (std::size_t l = 0; l < rt.layers().size(); ++l) {
    std::vector<float> g(rt.layers()[l].numel);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = dense_value(world_rank(), it, l, i);
    copy_to(rt.gradient(l), g);
  }
}

/// ready() for every layer in backward order, each required to succeed.
inline void backward_all(omgs::Runtime& rt) {
  for (std::size_t l = rt.layers().size(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
}

}  // namespace omgs_test
