// omgs-bench-topk: top-k by magnitude, omgs::TopkSelector against two baselines on the same
// random normal data.
//   nth_element: on the host, single thread: copy |x|, std::nth_element for the k-th largest
//                magnitude, then one gather pass in index order (ties: lowest index), which
//                gives exactly the omgs output.
//   Kokkos::sort: 64-bit keys (~magnitude << 32 | index) on the execution space,
//                Kokkos::sort, then the first k indices sorted ascending and gathered.
// Each figure is the median of repeated runs (after one warm-up). GB/s is n * 4 bytes over
// the time. Not a test: ctest never runs it.
//
// Usage: omgs-bench-topk [--large] [--reps R] [--no-sort]
//   --large   also n = 1e8 (needs ~3 GiB of memory and minutes)
//   --reps R  repetitions per figure (default 7; 3 at n = 1e8)
//   --no-sort skip the Kokkos::sort baseline
#include <omgs/select.hpp>

#include <Kokkos_Core.hpp>
#include <Kokkos_Sort.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

double median_ms(int reps, const std::function<void()>& body) {
  body();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Host baseline: nth_element on a copy of the magnitudes, then a gather in index order.
void nth_element_topk(const std::vector<float>& x, std::size_t k, std::vector<float>& work,
                      std::vector<std::uint32_t>& out_index, std::vector<float>& out_value) {
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) work[i] = std::fabs(x[i]);
  std::nth_element(work.begin(), work.begin() + (k - 1), work.end(), std::greater<float>());
  const float thr = work[k - 1];
  std::size_t above = 0;
  for (std::size_t i = 0; i < k - 1; ++i) above += work[i] > thr ? 1 : 0;
  std::size_t ties = k - above, out = 0;
  for (std::size_t i = 0; i < n && out < k; ++i) {
    const float a = std::fabs(x[i]);
    if (a > thr || (a == thr && ties > 0)) {
      if (a == thr) --ties;
      out_index[out] = static_cast<std::uint32_t>(i);
      out_value[out] = x[i];
      ++out;
    }
  }
}

struct SortKeys {
  Kokkos::View<const float*, Mem> x;
  Kokkos::View<std::uint64_t*, Mem> keys;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::uint64_t mag = omgs::detail::magnitude_key(x(i));
    keys(i) = ((0xffffffffull - mag) << 32) | static_cast<std::uint64_t>(i);
  }
};

struct SortTake {
  Kokkos::View<const std::uint64_t*, Mem> keys;
  Kokkos::View<std::uint32_t*, Mem> index;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    index(j) = static_cast<std::uint32_t>(keys(j) & 0xffffffffu);
  }
};

struct SortGather {
  Kokkos::View<const float*, Mem> x;
  Kokkos::View<const std::uint32_t*, Mem> index;
  Kokkos::View<float*, Mem> value;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const { value(j) = x(index(j)); }
};

}  // namespace

int main(int argc, char** argv) {
  bool large = false, with_sort = true;
  int reps_arg = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--large") {
      large = true;
    } else if (a == "--no-sort") {
      with_sort = false;
    } else if (a == "--reps" && i + 1 < argc) {
      reps_arg = std::atoi(argv[++i]);
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr, "usage: %s [--large] [--reps R] [--no-sort]\n", argv[0]);
      return 2;
    }
  }
  Kokkos::ScopeGuard guard(argc, argv);
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  std::printf("omgs-bench-topk: execution space %s, concurrency %d\n", Exec::name(),
              Exec().concurrency());
  std::printf("%10s %7s %8s | %9s %7s | %9s | %9s %9s | %8s %8s\n", "n", "density", "k", "omgs_ms",
              "GB/s", "fb_ms", "nth_ms", "sort_ms", "nth/omgs", "sort/omgs");
  std::vector<std::size_t> sizes = {100000, 1000000, 10000000};
  if (large) sizes.push_back(100000000);
  int failures = 0;
  for (std::size_t n : sizes) {
    const int reps = reps_arg > 0 ? reps_arg : (n >= 100000000 ? 3 : 7);
    std::vector<float> hx(n);
    std::mt19937 rng(12345);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : hx) v = normal(rng);
    Kokkos::View<float*, Mem> x(std::string("x"), n);
    {
      auto h = Kokkos::create_mirror_view(x);
      for (std::size_t i = 0; i < n; ++i) h(i) = hx[i];
      Kokkos::deep_copy(x, h);
    }
    Kokkos::View<float*, Mem> grad(std::string("grad"), n), residual(std::string("residual"), n);
    Kokkos::deep_copy(grad, x);
    for (double density : {0.001, 0.01}) {
      const std::size_t k = static_cast<std::size_t>(std::ceil(density * n));
      omgs::TopkSelector<Exec> sel(n, k);
      Kokkos::View<std::uint32_t*, Mem> oi(std::string("oi"), k);
      Kokkos::View<float*, Mem> ov(std::string("ov"), k);
      const double omgs_ms = median_ms(reps, [&] {
        sel.select(x, k, oi, ov);
        Exec().fence();
      });
      // Feedback form: grad = x, residual small (reset each run outside the timing would
      // need a copy; the residual just keeps evolving, which is what training does).
      Kokkos::deep_copy(residual, 0.0f);
      const double fb_ms = median_ms(reps, [&] {
        sel.select_with_feedback(grad, residual, k, oi, ov);
        Exec().fence();
      });
      sel.select(x, k, oi, ov);
      Exec().fence();

      std::vector<float> work(n), hv(k);
      std::vector<std::uint32_t> hi(k);
      const double nth_ms = median_ms(reps, [&] { nth_element_topk(hx, k, work, hi, hv); });
      {  // the baseline and omgs must agree exactly
        auto oih = Kokkos::create_mirror_view(oi);
        Kokkos::deep_copy(oih, oi);
        for (std::size_t j = 0; j < k; ++j) failures += oih(j) != hi[j] ? 1 : 0;
      }

      double sort_ms = 0.0;
      if (with_sort) {
        Kokkos::View<std::uint64_t*, Mem> keys(std::string("keys"), n);
        Kokkos::View<std::uint32_t*, Mem> si(std::string("si"), k);
        Kokkos::View<float*, Mem> sv(std::string("sv"), k);
        sort_ms = median_ms(n >= 100000000 ? 1 : (reps < 3 ? reps : 3), [&] {
          Kokkos::parallel_for("bench::keys", Policy(0, static_cast<std::int64_t>(n)),
                               SortKeys{x, keys});
          Kokkos::sort(keys);
          Kokkos::parallel_for("bench::take", Policy(0, static_cast<std::int64_t>(k)),
                               SortTake{keys, si});
          Kokkos::sort(si);
          Kokkos::parallel_for("bench::gather", Policy(0, static_cast<std::int64_t>(k)),
                               SortGather{x, si, sv});
          Exec().fence();
        });
      }
      std::printf("%10zu %7.3f %8zu | %9.3f %7.2f | %9.3f | %9.3f %9.3f | %8.2f %8.2f\n", n,
                  density, k, omgs_ms, n * 4.0 / (omgs_ms * 1e6), fb_ms, nth_ms, sort_ms,
                  nth_ms / omgs_ms, with_sort ? sort_ms / omgs_ms : 0.0);
      std::fflush(stdout);
    }
  }
  if (failures != 0) {
    std::printf("MISMATCH: omgs and nth_element disagree on %d outputs\n", failures);
    return 1;
  }
  return 0;
}
