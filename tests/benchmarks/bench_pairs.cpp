// omgs-bench-topk --only-pairs (or the last table of a full run): the compact pair format
// (omgs/pair_format.hpp) against today's 8-byte (index, value) pairs, in the same run on the
// same selection. Per group size n, density d and wire value type:
//   bytes/pair  the compact block's bytes per pair (8 for the 8-byte form)
//   encode      8-byte: the runtime's pack kernel (pairs from the selection's index and value
//               views); compact: encode_pairs, with the rounding error fed into a residual
//   decode      P = 4 ranks' blocks into a zeroed group: 8-byte: the runtime's scatter-add
//               (atomic add of value / P per pair); compact: decode_pairs (prefix sum over
//               the chunk counts, then one thread per pair); the zeroing is in both
//   u+s         the runtime's decode: the blocks unpacked into P k 8-byte pairs
//               (detail::pairs::unpack), then the 8-byte form's scatter-add
// min / median / max over R runs after one warm-up, ratios against the 8-byte form.
#include "bench_pairs.hpp"

#include <omgs/pair_format.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using FloatView = Kokkos::View<float*, Mem>;
using IndexView = Kokkos::View<std::uint32_t*, Mem>;
using WordView = Kokkos::View<std::uint32_t*, Mem>;
constexpr int ranks = 4;

struct Pair {
  std::uint32_t index;
  float value;
};
using PairView = Kokkos::View<Pair*, Mem>;

struct Times {
  double min, median, max;
};

Times time_ms(int reps, const std::function<void()>& body) {
  body();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    Exec().fence();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

/// k ascending indices of [0, n) (a random selection) and their values.
void make_selection(std::size_t n, std::size_t k, IndexView idx, FloatView val) {
  std::mt19937 rng(11);
  std::vector<std::uint32_t> pick;
  std::uniform_int_distribution<std::uint64_t> any(0, n - 1);
  std::vector<char> taken(n, 0);
  while (pick.size() < k) {
    const auto j = static_cast<std::uint32_t>(any(rng));
    if (!taken[j]) pick.push_back(j), taken[j] = 1;
  }
  std::sort(pick.begin(), pick.end());
  auto hi = Kokkos::create_mirror_view(idx);
  auto hv = Kokkos::create_mirror_view(val);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < k; ++i) hi(i) = pick[i], hv(i) = normal(rng);
  Kokkos::deep_copy(idx, hi);
  Kokkos::deep_copy(val, hv);
}

void print_row(std::size_t n, double d, const char* form, double bpp, Times enc, Times dec,
               Times unp, Times enc0, Times dec0) {
  std::printf(
      "%10zu %6.3f %-6s %6.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f | %6.2f "
      "%6.2f %6.2f\n",
      n, d, form, bpp, enc.min, enc.median, enc.max, dec.min, dec.median, dec.max, unp.min,
      unp.median, unp.max, enc.median / enc0.median, dec.median / dec0.median,
      unp.median / dec0.median);
}

void bench_size(std::size_t n, double d, int reps) {
  const std::size_t k = static_cast<std::size_t>(d * static_cast<double>(n));
  IndexView idx("idx", k);
  FloatView val("val", k), out("out", n), resid("resid", n);
  make_selection(n, k, idx, val);
  const Exec exec;
  // Today's form: pack, then the P ranks' pairs (here P copies) scatter-added / P.
  PairView send("send", k), recv("recv", k * ranks);
  const auto pack = [&] {
    Kokkos::parallel_for(
        "pack", Kokkos::RangePolicy<Exec>(exec, 0, k), KOKKOS_LAMBDA(const std::size_t i) {
          send(i) = Pair{idx(i), val(i)};
        });
  };
  pack();
  for (int r = 0; r < ranks; ++r)
    Kokkos::deep_copy(Kokkos::subview(recv, std::make_pair(k * r, k * (r + 1))), send);
  const float scale = 1.0f / ranks;
  const auto scatter = [&] {
    Kokkos::deep_copy(exec, out, 0.0f);
    Kokkos::parallel_for(
        "scatter_add", Kokkos::RangePolicy<Exec>(exec, 0, k * ranks),
        KOKKOS_LAMBDA(const std::size_t i) {
          const Pair p = recv(i);
          Kokkos::atomic_add(&out(p.index), p.value * scale);
        });
  };
  const Times enc0 = time_ms(reps, pack), dec0 = time_ms(reps, scatter);
  print_row(n, d, "8-byte", 8.0, enc0, dec0, dec0, enc0, dec0);
  for (omgs::WireValues v :
       {omgs::WireValues::fp32, omgs::WireValues::bf16, omgs::WireValues::fp16}) {
    const omgs::PairLayout l = omgs::make_pair_layout(n, k, v);
    WordView words("words", l.words * ranks);
    Kokkos::View<std::size_t*, Mem> starts("starts", l.chunks * ranks);
    auto mine = Kokkos::subview(words, std::make_pair(std::size_t(0), l.words));
    const auto encode = [&] { omgs::encode_pairs(exec, l, idx, val, resid, mine); };
    encode();
    for (int r = 1; r < ranks; ++r)
      Kokkos::deep_copy(Kokkos::subview(words, std::make_pair(l.words * r, l.words * (r + 1))),
                        mine);
    const auto decode = [&] {
      Kokkos::deep_copy(exec, out, 0.0f);
      omgs::decode_pairs(exec, l, words, ranks, starts, out, scale);
    };
    // The runtime's decode: the blocks unpacked into P k pairs, then the same scatter-add.
    const auto unpack = [&] {
      omgs::detail::pairs::unpack(exec, l, words, ranks, starts, recv);
      scatter();
    };
    const std::string form(omgs::to_string(v));
    print_row(n, d, form.c_str(), l.bytes_per_pair(), time_ms(reps, encode), time_ms(reps, decode),
              time_ms(reps, unpack), enc0, dec0);
  }
}

}  // namespace

namespace omgs_bench {

void bench_pairs(int reps) {
  std::printf(
      "\npair formats: ms per call, min / median / max of %d runs; decode of %d ranks' blocks; "
      "ratios of medians against the 8-byte form\n",
      reps, ranks);
  std::printf("%10s %6s %-6s %6s | %7s %7s %7s | %7s %7s %7s | %7s %7s %7s | %6s %6s %6s\n", "n",
              "dens", "form", "B/pair", "enc min", "enc med", "enc max", "dec min", "dec med",
              "dec max", "u+s min", "u+s med", "u+s max", "enc/8B", "dec/8B", "u+s/8B");
  for (std::size_t n : {std::size_t(1000000), std::size_t(10000000)})
    for (double d : {0.001, 0.01}) bench_size(n, d, reps);
}

}  // namespace omgs_bench
