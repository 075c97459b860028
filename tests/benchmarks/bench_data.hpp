// Test data of the top-k benchmarks (omgs-bench-topk, omgs-bench-topk-layers), the same in
// both so that their figures compare: "normal" N(0, 1), or "gradient-like": 30% exact
// zeros (either sign), 20% on 16 magnitude levels near 2^-10, the rest heavy-tailed
// N(0, 1) * exp(1.5 N(0, 1)). Deterministic (a fixed seed).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace omgs_bench {

inline std::vector<float> make_data(bool gradient_like, std::size_t n) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) {
    if (!gradient_like) {
      v = normal(rng);
      continue;
    }
    const std::uint32_t u = rng() % 10;
    const float sign = (rng() & 1u) ? -1.0f : 1.0f;
    if (u < 3) {
      v = sign * 0.0f;
    } else if (u < 5) {
      v = sign * std::ldexp(1.0f + static_cast<float>(rng() % 16) / 16.0f, -10);
    } else {
      v = normal(rng) * std::exp(1.5f * normal(rng));
    }
  }
  return x;
}

}  // namespace omgs_bench
