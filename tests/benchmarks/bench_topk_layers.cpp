// omgs-bench-topk-layers: what a layer-wise plan costs in sparsify time. One gradient of a
// model's layer sizes (a model CSV: name,numel,backward_s), sparsified in the same run, on
// the same data and with the same selector, (a) one call per layer, as the layer-wise plan
// does, and (b) one call over the whole gradient, as a single group does. Each call is the
// runtime's: the one-read feedback form (residual in -> residual out, the two buffers
// swapped every iteration) at k = ceil(density * n), followed by a fence. The two forms
// alternate, each iteration reports both; the medians and their ratio are printed, with
// the layer-wise time split by the path each call took (docs/select.md).
// Not a test: ctest never runs it.
//
// Usage: omgs-bench-topk-layers [--model CSV] [--density D] [--reps R] [--grad]
//   --model CSV   layer sizes (default: examples/models/resnet50.csv of the source tree)
//   --density D   default 0.001 (the main job's)
//   --reps R      iterations (default 9), after one warm-up
//   --grad        gradient-like data (as omgs-bench-topk) instead of N(0, 1)
//   --per-layer   also each layer's median time against its share (n / N) of the one call
#include "bench_data.hpp"

#include <omgs/select.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef OMGS_SOURCE_DIR
#define OMGS_SOURCE_DIR "."
#endif

namespace {

using omgs_bench::make_data;

using Exec = Kokkos::DefaultExecutionSpace;
using FloatView = Kokkos::View<float*, Exec::memory_space>;
using IndexView = Kokkos::View<std::uint32_t*, Exec::memory_space>;
using Clock = std::chrono::steady_clock;

std::vector<std::size_t> read_sizes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open model file " + path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::size_t> sizes;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string name, numel;
    if (std::getline(ss, name, ',') && std::getline(ss, numel, ','))
      sizes.push_back(std::stoul(numel));
  }
  if (sizes.empty()) throw std::runtime_error("no layers in " + path);
  return sizes;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Setup {
  std::vector<std::size_t> sizes, offsets;
  std::size_t total = 0;
  double density = 0.001;
};

/// One sparsify step per call: layer-wise or whole, times (ms) per path of the calls.
class Sparsify {
 public:
  explicit Sparsify(const Setup& s, const std::vector<float>& data)
      : s_(s),
        sel_(s.total),
        x_(std::string("x"), s.total),
        oi_(std::string("oi"), k_of(s.total)),
        ov_(std::string("ov"), k_of(s.total)) {
    res_[0] = FloatView(std::string("residual_a"), s.total);
    res_[1] = FloatView(std::string("residual_b"), s.total);
    const auto h = Kokkos::create_mirror_view(x_);
    for (std::size_t i = 0; i < s.total; ++i) h(i) = data[i];
    Kokkos::deep_copy(x_, h);
  }

  std::size_t k_of(std::size_t n) const {
    return static_cast<std::size_t>(std::ceil(s_.density * static_cast<double>(n)));
  }

  /// One call on entries [off, off + n); returns its wall time (ms) and its path.
  double call(std::size_t off, std::size_t n, int cur, omgs::TopkPath& path) {
    const auto r = std::make_pair(off, off + n);
    const auto t0 = Clock::now();
    const omgs::TopkResult res =
        sel_.select_with_feedback(Kokkos::subview(x_, r), Kokkos::subview(res_[cur], r),
                                  Kokkos::subview(res_[1 - cur], r), k_of(n), oi_, ov_);
    sel_.execution_space_instance().fence();
    const double ms = ms_since(t0);
    if (!res.ok()) throw std::runtime_error("select_with_feedback failed");
    path = sel_.last_path();
    return ms;
  }

  /// Layer-wise: per-path sums in by_path[path], call counts in calls[path], each layer's
  /// time appended to per_layer[l].
  double layerwise(int cur, double* by_path, int* calls,
                   std::vector<std::vector<double>>& per_layer) {
    const auto t0 = Clock::now();
    per_layer.resize(s_.sizes.size());
    for (std::size_t l = 0; l < s_.sizes.size(); ++l) {
      omgs::TopkPath p = omgs::TopkPath::none;
      const double ms = call(s_.offsets[l], s_.sizes[l], cur, p);
      by_path[static_cast<int>(p)] += ms;
      ++calls[static_cast<int>(p)];
      per_layer[l].push_back(ms);
    }
    return ms_since(t0);
  }

  double whole(int cur, omgs::TopkPath& path) { return call(0, s_.total, cur, path); }

 private:
  const Setup& s_;
  omgs::TopkSelector<Exec> sel_;
  FloatView x_, res_[2];
  IndexView oi_;
  FloatView ov_;
};

const char* path_name(int p) {
  static const char* names[] = {"none", "small", "sampled", "radix", "fallback"};
  return names[p];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(OMGS_SOURCE_DIR) + "/examples/models/resnet50.csv";
  Setup s;
  int reps = 9;
  bool grad = false, per_layer = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--density" && i + 1 < argc) {
      s.density = std::atof(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--grad") {
      grad = true;
    } else if (a == "--per-layer") {
      per_layer = true;
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr,
                   "usage: %s [--model CSV] [--density D] [--reps R] [--grad] [--per-layer]\n",
                   argv[0]);
      return 2;
    }
  }
  if (reps < 1 || !(s.density > 0.0 && s.density <= 1.0)) {
    std::fprintf(stderr, "%s: --reps must be >= 1 and --density in (0, 1]\n", argv[0]);
    return 2;
  }
  Kokkos::ScopeGuard guard(argc, argv);
  s.sizes = read_sizes(model);
  for (std::size_t n : s.sizes) s.offsets.push_back(s.total), s.total += n;
  std::printf(
      "omgs-bench-topk-layers: %s, %zu layers, %zu entries, density %g, %s data, "
      "execution space %s, concurrency %d\n",
      model.c_str(), s.sizes.size(), s.total, s.density, grad ? "gradient-like" : "normal",
      Exec::name(), Exec().concurrency());
  Sparsify sp(s, make_data(grad, s.total));
  std::vector<double> lw, one;
  double by_path[5] = {0, 0, 0, 0, 0};
  int calls[5] = {0, 0, 0, 0, 0};
  std::vector<std::vector<double>> layer_ms;
  omgs::TopkPath whole_path = omgs::TopkPath::none;
  int cur = 0;
  for (int it = 0; it <= reps; ++it, cur = 1 - cur) {  // iteration 0: warm-up
    double bp[5] = {0, 0, 0, 0, 0};
    int c[5] = {0, 0, 0, 0, 0};
    // Alternate which form goes first; each reads residual `cur` and writes the other.
    const double a = it % 2 ? sp.whole(cur, whole_path) : sp.layerwise(cur, bp, c, layer_ms);
    const double b = it % 2 ? sp.layerwise(cur, bp, c, layer_ms) : sp.whole(cur, whole_path);
    if (it == 0) continue;
    lw.push_back(it % 2 ? b : a);
    one.push_back(it % 2 ? a : b);
    std::printf("iteration %2d: layer-wise %8.2f ms, one group %8.2f ms, ratio %.3f\n", it,
                lw.back(), one.back(), lw.back() / one.back());
    for (int p = 0; p < 5; ++p) by_path[p] += bp[p] / reps, calls[p] = c[p];
  }
  std::printf("median: layer-wise %.2f ms, one group %.2f ms (path %s): ratio %.3f\n", median(lw),
              median(one), path_name(static_cast<int>(whole_path)), median(lw) / median(one));
  std::printf("layer-wise calls by path (mean ms per iteration):");
  for (int p = 1; p < 5; ++p)
    if (calls[p] > 0) std::printf("  %s %d calls %.2f ms", path_name(p), calls[p], by_path[p]);
  std::printf("\n");
  if (per_layer) {
    std::printf("%5s %10s %10s %10s %7s\n", "layer", "n", "ms", "share ms", "ratio");
    for (std::size_t l = 0; l < s.sizes.size(); ++l) {
      const double share = median(one) * static_cast<double>(s.sizes[l]) / s.total;
      const double ms = median(std::vector<double>(layer_ms[l].begin() + 1, layer_ms[l].end()));
      std::printf("%5zu %10zu %10.4f %10.4f %7.2f\n", l, s.sizes[l], ms, share, ms / share);
    }
  }
  return 0;
}
