// Synthetic selections of one group's gradient, as a rank's top-k hands them to the sparse
// allreduce (k distinct (index, value) pairs below n), from three sources:
//   uniform    indices uniform over [0, n), N(0, 1) values (a fraction `overlap` of the
//              indices the same on every rank)
//   zipf       an embedding-like table of rows of 64 entries, ordered by frequency as a
//              tokenizer's vocabulary is: a pair's row is Zipf-distributed (weight 1 / (r +
//              1)^1.1, so the first rows hold most pairs), its column uniform; magnitudes
//              Pareto (alpha 1.5) scaled by 1 / sqrt(row + 1), so the hot rows also hold the
//              largest entries
//   clustered  four hot ranges of n / 256 entries each (the same on every rank and every
//              iteration, as an output layer or attention block is) hold 90% of every
//              rank's pairs with Pareto magnitudes; the rest uniform with small values
// Every rank draws its own pairs (its own batch) over the same structure; `iteration`
// changes the draw, not the structure. Deterministic for (source, n, k, rank, iteration).
// top_k_pairs selects from a dense gradient instead (a saved one: examples/gradient_file.hpp).
#pragma once

#include <omgs/comm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace omgs_test {

enum class SparseSource { uniform, zipf, clustered };

inline const char* to_string(SparseSource s) {
  switch (s) {
    case SparseSource::uniform:
      return "uniform";
    case SparseSource::zipf:
      return "zipf";
    case SparseSource::clustered:
      return "clustered";
  }
  return "?";
}

/// "uniform", "zipf" or "clustered"; std::invalid_argument naming the text otherwise.
inline SparseSource parse_sparse_source(const std::string& s) {
  for (SparseSource v : {SparseSource::uniform, SparseSource::zipf, SparseSource::clustered})
    if (s == to_string(v)) return v;
  throw std::invalid_argument("unknown source '" + s + "' (uniform, zipf or clustered)");
}

namespace detail_sources {

/// Collects distinct indices with their values until `want` (or n) of them.
struct Picker {
  std::uint64_t n;
  std::size_t want;
  std::unordered_set<std::uint32_t> seen;
  std::vector<omgs::SparsePair> out;

  Picker(std::uint64_t n_, std::size_t want_)
      : n(n_), want(static_cast<std::size_t>(std::min<std::uint64_t>(n_, want_))) {
    seen.reserve(want * 2);
    out.reserve(want);
  }
  bool full() const { return out.size() >= want; }
  void add(std::uint64_t index, float value) {
    if (full() || index >= n || !seen.insert(static_cast<std::uint32_t>(index)).second) return;
    out.push_back({static_cast<std::uint32_t>(index), value});
  }
};

inline float pareto(std::mt19937_64& gen, double alpha) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(gen);
  const double sign = (gen() & 1u) ? -1.0 : 1.0;
  return static_cast<float>(sign * std::pow(1.0 - u, -1.0 / alpha));
}

inline void fill_uniform(Picker& pick, std::mt19937_64& gen, float sigma) {
  std::uniform_int_distribution<std::uint64_t> idx(0, pick.n - 1);
  std::normal_distribution<float> val(0.0f, sigma);
  while (!pick.full()) pick.add(idx(gen), val(gen));
}

inline void fill_zipf(Picker& pick, std::mt19937_64& gen) {
  const std::uint64_t width = pick.n >= 64 * 16 ? 64 : 1;
  const std::uint64_t rows = (pick.n + width - 1) / width;
  std::vector<double> cumulative(static_cast<std::size_t>(rows));
  double sum = 0;
  for (std::uint64_t r = 0; r < rows; ++r)
    cumulative[static_cast<std::size_t>(r)] = sum += std::pow(static_cast<double>(r + 1), -1.1);
  std::uniform_real_distribution<double> u(0.0, sum);
  std::uniform_int_distribution<std::uint64_t> col(0, width - 1);
  // The hot rows fill up: past 20 k draws the rest is uniform (never reached by the sizes
  // the tests and the benchmark use, but it bounds the loop).
  for (std::size_t tries = 0; !pick.full() && tries < 20 * pick.want + 1000; ++tries) {
    const auto row = static_cast<std::uint64_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), u(gen)) - cumulative.begin());
    const std::uint64_t r = std::min(row, rows - 1);
    pick.add(r * width + col(gen),
             pareto(gen, 1.5) / static_cast<float>(std::sqrt(static_cast<double>(r + 1))));
  }
  fill_uniform(pick, gen, 0.01f);
}

inline void fill_clustered(Picker& pick, std::mt19937_64& gen) {
  const std::uint64_t width = std::max<std::uint64_t>(1, pick.n / 256);
  std::mt19937_64 layout(4242);  // the hot ranges: the same on every rank and iteration
  std::uniform_int_distribution<std::uint64_t> start(0, pick.n - width);
  std::uint64_t hot[4];
  for (auto& h : hot) h = start(layout);
  // At most half of the hot entries, so that the draws stay cheap.
  const std::size_t in_hot =
      std::min<std::size_t>(pick.want * 9 / 10, static_cast<std::size_t>(2 * width));
  std::uniform_int_distribution<std::uint64_t> which(0, 3), at(0, width - 1);
  while (pick.out.size() < in_hot) pick.add(hot[which(gen)] + at(gen), pareto(gen, 1.5));
  fill_uniform(pick, gen, 0.05f);
}

}  // namespace detail_sources

/// This rank's k distinct pairs of iteration `iteration` (indices < n, sorted by index).
inline std::vector<omgs::SparsePair> source_pairs(SparseSource source, std::uint64_t n,
                                                  std::size_t k, int rank, int iteration,
                                                  double overlap = 0.0) {
  using detail_sources::Picker;
  const auto it = static_cast<std::uint64_t>(iteration);
  std::mt19937_64 own(777 + static_cast<std::uint64_t>(rank) + 1000003 * it);
  Picker pick(n, k);
  if (n > 0) {
    if (source == SparseSource::uniform) {
      std::mt19937_64 shared(12345 + it);
      std::uniform_int_distribution<std::uint64_t> idx(0, n - 1);
      std::normal_distribution<float> val(0.0f, 1.0f);
      const auto common = static_cast<std::size_t>(overlap * static_cast<double>(pick.want));
      while (pick.out.size() < common) pick.add(idx(shared), val(own));
      detail_sources::fill_uniform(pick, own, 1.0f);
    } else if (source == SparseSource::zipf) {
      detail_sources::fill_zipf(pick, own);
    } else {
      detail_sources::fill_clustered(pick, own);
    }
  }
  std::sort(pick.out.begin(), pick.out.end(),
            [](const omgs::SparsePair& a, const omgs::SparsePair& b) { return a.index < b.index; });
  return pick.out;
}

/// The k largest-magnitude entries of a dense gradient g[0, n) as pairs sorted by index
/// (ties by lower index): a rank's top-k selection of a saved real gradient.
inline std::vector<omgs::SparsePair> top_k_pairs(const float* g, std::uint64_t n, std::size_t k) {
  std::vector<std::uint32_t> order(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i)
    order[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(i);
  const std::size_t keep = static_cast<std::size_t>(std::min<std::uint64_t>(k, n));
  const auto larger = [g](std::uint32_t a, std::uint32_t b) {
    const float x = std::fabs(g[a]), y = std::fabs(g[b]);
    return x > y || (x == y && a < b);
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                   larger);
  order.resize(keep);
  std::sort(order.begin(), order.end());
  std::vector<omgs::SparsePair> out;
  out.reserve(keep);
  for (const std::uint32_t i : order) out.push_back({i, g[i]});
  return out;
}

}  // namespace omgs_test
