// Host baselines of omgs-bench-topk, compiled in their own translation unit at -O3
// (tests/benchmarks/CMakeLists.txt): the strongest plain loops the compiler gives, so that
// the ratios against them are not flattered by a slow floor. omgs itself is compiled as
// configured (RelWithDebInfo: -O2).
#pragma once

#include <cstdint>

namespace omgs_bench {

/// One read of x: the largest magnitude key (bits & 0x7fffffff) over x[0, n).
std::uint32_t max_magnitude_key(const float* x, std::int64_t n);

/// One `r += g` pass over r[0, n) and g[0, n): 2 reads and 1 write per element.
void add_into(float* r, const float* g, std::int64_t n);

}  // namespace omgs_bench
