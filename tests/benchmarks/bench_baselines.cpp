#include "bench_baselines.hpp"

#include <cstring>

namespace omgs_bench {

std::uint32_t max_magnitude_key(const float* x, std::int64_t n) {
  // Signed 32-bit keys (a magnitude key is < 2^31) and eight independent lanes: an unsigned
  // max reduction does not vectorize on baseline x86-64 (no pmaxud before SSE4.1), a float
  // max is a latency-bound chain without -ffast-math.
  constexpr int lanes = 8;
  std::int32_t m[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (int l = 0; l < lanes; ++l) {
      std::int32_t k;
      std::memcpy(&k, x + i + l, sizeof k);
      k &= 0x7fffffff;
      m[l] = k > m[l] ? k : m[l];
    }
  }
  std::int32_t r = 0;
  for (; i < n; ++i) {
    std::int32_t k;
    std::memcpy(&k, x + i, sizeof k);
    k &= 0x7fffffff;
    r = k > r ? k : r;
  }
  for (int l = 0; l < lanes; ++l) r = m[l] > r ? m[l] : r;
  return static_cast<std::uint32_t>(r);
}

void add_into(float* __restrict r, const float* __restrict g, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) r[i] += g[i];
}

}  // namespace omgs_bench
