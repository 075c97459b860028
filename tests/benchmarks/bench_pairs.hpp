// omgs-bench-topk's table of the pair formats (bench_pairs.cpp).
#pragma once

namespace omgs_bench {

/// The compact pair format against the 8-byte pairs: bytes per pair, encode and decode
/// times with ratios, for n = 1e6 and 1e7 at densities 0.001 and 0.01.
void bench_pairs(int reps);

}  // namespace omgs_bench
