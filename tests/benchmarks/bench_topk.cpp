// omgs-bench-topk: top-k by magnitude, omgs::TopkSelector against memory-bound baselines and
// std::nth_element, in the same run and on the same data.
//   read:   one read of x (max |x|), the floor for select: on host memory a plain loop
//           compiled at -O3 in its own file (bench_baselines.cpp), run on every thread of
//           the execution space (one chunk each: 1 on Serial, OMP_NUM_THREADS on OpenMP), on
//           a device a Kokkos max-reduction kernel over the same view (the bandwidth floor)
//   r+=g:   one pass residual += grad, the floor for select_with_feedback (host: -O3 and
//           every thread too)
//   select, select_with_feedback: omgs (the path taken is printed); "feedback" is the
//           in-place form, "fb 1-read" the one-read form (residual_in -> residual_out, the
//           two buffers swapped after each call, as the runtime does); both start from a zero
//           residual and make the same number of calls, so each call sees the same data
//   nth:    host, single thread: copy |x|, std::nth_element, one gather pass in index order
//           (ties: lowest index), which gives exactly the omgs output (checked)
// Data: "normal" (N(0,1)) and "grad" (gradient-like: 30% exact zeros, 20% on 16 magnitude
// levels, the rest heavy-tailed N(0,1) * exp(1.5 N(0,1))). Medians of R runs after one
// warm-up. A last table gives the per-call cost of small groups (n <= 4096).
// Not a test: ctest never runs it.
//
// A last table compares the compact pair format with the 8-byte pairs (bench_pairs.cpp).
//
// Usage: omgs-bench-topk [--large] [--only-large] [--only-small] [--only-pairs] [--reps R]
//   --large       also n = 1e8 (needs ~3 GiB of memory and minutes)
//   --only-large  only n = 1e8
//   --only-small  only the small-group table (e.g. under valgrind --tool=callgrind)
//   --only-pairs  only the pair formats' table
//   --reps R      repetitions per figure (default 7; 3 at n = 1e8)
#include "bench_baselines.hpp"
#include "bench_data.hpp"
#include "bench_pairs.hpp"

#include <omgs/select.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using omgs_bench::make_data;

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using FloatView = Kokkos::View<float*, Mem>;
using IndexView = Kokkos::View<std::uint32_t*, Mem>;

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

/// Like median_ms, but the process CPU time (milliseconds): on a shared machine it excludes
/// the time other processes held the core.
double median_cpu_ms(int reps, const std::function<void()>& body) {
  const auto cpu_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
  };
  body();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = cpu_ms();
    body();
    t.push_back(cpu_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Host baseline: nth_element on a copy of the magnitudes, then a gather in index order.
void nth_element_topk(const std::vector<float>& x, std::size_t k, std::vector<float>& work,
                      std::vector<std::uint32_t>& out_index) {
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
      out_index[out++] = static_cast<std::uint32_t>(i);
    }
  }
}

struct MaxAbs {
  Kokkos::View<const float*, Mem> x;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, float& m) const {
    const float a = x(i) < 0 ? -x(i) : x(i);
    m = a > m ? a : m;
  }
#if KOKKOS_VERSION < 40000
  // Kokkos 3's device back-ends join through volatile references; Kokkos 4 never calls this
  // overload (nvcc then warns that it is unreferenced).
  KOKKOS_INLINE_FUNCTION void join(volatile float& d, const volatile float& s) const {
    d = s > d ? s : d;
  }
#endif
  KOKKOS_INLINE_FUNCTION void join(float& d, const float& s) const {
    d = s > d ? s : d;
  }
  KOKKOS_INLINE_FUNCTION void init(float& m) const {
    m = 0.0f;
  }
};

struct AddInto {
  Kokkos::View<const float*, Mem> g;
  FloatView r;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const { r(i) += g(i); }
};

using Host = Kokkos::DefaultHostExecutionSpace;

/// Host memory: f(t, begin, end) for t in [0, Host().concurrency()), on the t-th chunk of
/// [0, n), in parallel on the host execution space (the same threads as Exec on host
/// backends), so that the baselines use every thread that select uses.
template <class F>
void host_chunks(std::int64_t n, const F& f) {
  const int c = Host().concurrency();
  const std::int64_t chunk = (n + c - 1) / c;
  Kokkos::parallel_for("bench::chunks", Kokkos::RangePolicy<Host>(0, c), [=](const int t) {
    const std::int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) f(t, b, e);
  });
  Host().fence();
}

/// One read of x: a plain loop where the memory is host-accessible (the strongest baseline
/// the compiler gives), a Kokkos reduction otherwise.
float max_abs(const FloatView& x) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
    std::vector<std::uint32_t> m(static_cast<std::size_t>(Host().concurrency()), 0u);
    std::uint32_t* const mp = m.data();
    const float* const xp = x.data();
    host_chunks(n, [=](int t, std::int64_t b, std::int64_t e) {
      mp[t] = omgs_bench::max_magnitude_key(xp + b, e - b);
    });
    return static_cast<float>(*std::max_element(m.begin(), m.end()));
  }
  float m = 0.0f;
  Kokkos::parallel_reduce("bench::maxabs", Kokkos::RangePolicy<Exec>(0, n), MaxAbs{x}, m);
  return m;
}

void add_into(const FloatView& r, const FloatView& g) {
  const std::int64_t n = static_cast<std::int64_t>(r.extent(0));
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
    float* const rp = r.data();
    const float* const gp = g.data();
    host_chunks(n, [=](int, std::int64_t b, std::int64_t e) {
      omgs_bench::add_into(rp + b, gp + b, e - b);
    });
    return;
  }
  Kokkos::parallel_for("bench::add", Kokkos::RangePolicy<Exec>(0, n), AddInto{g, r});
  Exec().fence();
}

FloatView to_device(const std::vector<float>& h, const char* label) {
  FloatView d(std::string(label), h.size());
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(d, m);
  return d;
}

const char* path_name(omgs::TopkPath p) {
  switch (p) {
    case omgs::TopkPath::small:
      return "small";
    case omgs::TopkPath::sampled:
      return "sampled";
    case omgs::TopkPath::radix:
      return "radix";
    case omgs::TopkPath::radix_fallback:
      return "fallback";
    default:
      return "-";
  }
}

/// One row: every figure for one (data, n, density). Returns the number of mismatches.
int bench_row(const char* data, const std::vector<float>& hx, const FloatView& x, double density,
              int reps) {
  const std::size_t n = hx.size();
  const std::size_t k = static_cast<std::size_t>(std::ceil(density * n));
  omgs::TopkSelector<Exec> sel(n, k);
  IndexView oi(std::string("oi"), k);
  FloatView ov(std::string("ov"), k);
  FloatView residual(std::string("residual"), n), scratch(std::string("scratch"), n);
  volatile float sink = 0.0f;
  const double read_ms = median_ms(reps, [&] { sink = sink + max_abs(x); });
  const double radd_ms = median_ms(reps, [&] { add_into(scratch, x); });
  const double sel_ms = median_ms(reps, [&] {
    sel.select(x, k, oi, ov);
    Exec().fence();
  });
  const char* sel_path = path_name(sel.last_path());
  // Feedback form: grad = x; the residual evolves from zero as in training.
  const double fb_ms = median_ms(reps, [&] {
    sel.select_with_feedback(x, residual, k, oi, ov);
    Exec().fence();
  });
  const char* fb_path = path_name(sel.last_path());
  FloatView res_a(std::string("residual_a"), n), res_b(std::string("residual_b"), n);
  bool flip = false;
  const double fb1_ms = median_ms(reps, [&] {
    const omgs::TopkResult r =
        sel.select_with_feedback(x, flip ? res_b : res_a, flip ? res_a : res_b, k, oi, ov);
    Exec().fence();
    if (r.ok()) flip = !flip;
  });
  const char* fb1_path = path_name(sel.last_path());
  sel.select(x, k, oi, ov);
  Exec().fence();
  std::vector<float> work(n);
  std::vector<std::uint32_t> hi(k);
  const double nth_ms = median_ms(reps, [&] { nth_element_topk(hx, k, work, hi); });
  auto oih = Kokkos::create_mirror_view(oi);
  Kokkos::deep_copy(oih, oi);
  int failures = 0;
  for (std::size_t j = 0; j < k; ++j) failures += oih(j) != hi[j] ? 1 : 0;
  std::printf(
      "%-6s %10zu %6.3f | %7.2f %7.2f | %8.2f %-8s %8.2f %-8s %8.2f %-8s | %8.2f | %6.2f %6.2f "
      "%7.2f %6.2f\n",
      data, n, density, read_ms, radd_ms, sel_ms, sel_path, fb_ms, fb_path, fb1_ms, fb1_path,
      nth_ms, sel_ms / read_ms, fb_ms / radd_ms, fb1_ms / radd_ms, nth_ms / sel_ms);
  std::fflush(stdout);
  return failures;
}

/// The runtime's wire format (omgs::SparsePair) and its pack kernel, as the runtime runs it
/// after each selection.
struct Pair {
  std::uint32_t index;
  float value;
};
struct Pack {
  Kokkos::View<Pair*, Exec::memory_space> pairs;
  IndexView index;
  FloatView value;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    pairs(i) = Pair{index(i), value(i)};
  }
};

/// Per-call cost of small groups: median over batches of 200 calls, wall and process CPU
/// time; "fb 1-read" is the one-read form (two residual buffers, swapped); "fb+pack" adds
/// what the runtime does around the one-read call (pack the pairs, fence).
void bench_small(int reps) {
  std::printf("\nsmall groups: microseconds per call (median of %d batches of 200 calls)\n", reps);
  std::printf("%8s %8s | %9s %9s %9s %9s | %9s %9s %9s %9s\n", "n", "k", "select", "feedback",
              "fb 1-read", "fb+pack", "cpu sel", "cpu fb", "cpu fb1", "cpu f+p");
  for (std::size_t n : {std::size_t(256), std::size_t(1024), std::size_t(4096)}) {
    const std::vector<float> hx = make_data(true, n);
    const FloatView x = to_device(hx, "x");
    FloatView residual(std::string("residual"), n);
    FloatView res[2] = {FloatView(std::string("residual_a"), n),
                        FloatView(std::string("residual_b"), n)};
    int cur = 0;
    const std::size_t k = n / 100 + 1;
    omgs::TopkSelector<Exec> sel(n, k);
    IndexView oi(std::string("oi"), k);
    FloatView ov(std::string("ov"), k);
    const Pack pack{Kokkos::View<Pair*, Exec::memory_space>(std::string("pairs"), k), oi, ov};
    const auto policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(
        sel.execution_space_instance(), 0, static_cast<std::int64_t>(k));
    const auto s_batch = [&] {
      for (int c = 0; c < 200; ++c) sel.select(x, k, oi, ov);
      Exec().fence();
    };
    const auto f_batch = [&] {
      for (int c = 0; c < 200; ++c) sel.select_with_feedback(x, residual, k, oi, ov);
      Exec().fence();
    };
    const auto one_read = [&] {
      if (sel.select_with_feedback(x, res[cur], res[1 - cur], k, oi, ov).ok()) cur = 1 - cur;
    };
    const auto f1_batch = [&] {
      for (int c = 0; c < 200; ++c) one_read();
      Exec().fence();
    };
    const auto p_batch = [&] {
      for (int c = 0; c < 200; ++c) {
        one_read();
        Kokkos::parallel_for("pack", policy, pack);
        sel.execution_space_instance().fence();
      }
    };
    const double us = 1000.0 / 200;
    std::printf("%8zu %8zu | %9.2f %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f %9.2f\n", n, k,
                us * median_ms(reps, s_batch), us * median_ms(reps, f_batch),
                us * median_ms(reps, f1_batch), us * median_ms(reps, p_batch),
                us * median_cpu_ms(reps, s_batch), us * median_cpu_ms(reps, f_batch),
                us * median_cpu_ms(reps, f1_batch), us * median_cpu_ms(reps, p_batch));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool large = false, only_large = false, only_small = false, only_pairs = false;
  int reps_arg = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--large") {
      large = true;
    } else if (a == "--only-large") {
      large = only_large = true;
    } else if (a == "--only-small") {
      only_small = true;
    } else if (a == "--only-pairs") {
      only_pairs = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps_arg = std::atoi(argv[++i]);
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr,
                   "usage: %s [--large] [--only-large] [--only-small] [--only-pairs] [--reps R]\n",
                   argv[0]);
      return 2;
    }
  }
  Kokkos::ScopeGuard guard(argc, argv);
  if (only_pairs) {
    omgs_bench::bench_pairs(reps_arg > 0 ? reps_arg : 7);
    return 0;
  }
  std::printf(
      "omgs-bench-topk: execution space %s, concurrency %d (host baselines: as many "
      "threads); times in ms\n",
      Exec::name(), Exec().concurrency());
  std::printf("%-6s %10s %6s | %7s %7s | %8s %-8s %8s %-8s %8s %-8s | %8s | %6s %6s %7s %6s\n",
              "data", "n", "dens", "read", "r+=g", "select", "path", "feedback", "path", "fb 1-rd",
              "path", "nth", "s/read", "fb/r+g", "fb1/r+g", "nth/s");
  std::vector<std::size_t> sizes;
  if (!only_large) sizes = {1000000, 10000000};
  if (large) sizes.push_back(100000000);
  if (only_small) sizes.clear();
  int failures = 0;
  for (std::size_t n : sizes) {
    const int reps = reps_arg > 0 ? reps_arg : (n >= 100000000 ? 3 : 7);
    for (bool gradient_like : {false, true}) {
      const std::vector<float> hx = make_data(gradient_like, n);
      const FloatView x = to_device(hx, "x");
      for (double density : {0.001, 0.01})
        failures += bench_row(gradient_like ? "grad" : "normal", hx, x, density, reps);
    }
  }
  bench_small(reps_arg > 0 ? reps_arg : 7);
  if (!only_small) omgs_bench::bench_pairs(reps_arg > 0 ? reps_arg : 7);
  if (failures != 0) {
    std::printf("MISMATCH: omgs and nth_element disagree on %d outputs\n", failures);
    return 1;
  }
  return 0;
}
