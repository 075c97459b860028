// Shared by the select tests: the reference (a sort by |x| descending, index ascending),
// the data distributions, and the checks of a selection and of the error-feedback identity.
#pragma once

#include <omgs/select.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "omgs_catch.hpp"

namespace select_test {

// The execution space under test: one program per enabled Kokkos backend
// (tests/select/CMakeLists.txt); a device backend is Kokkos' default space.
#ifdef OMGS_TEST_EXEC_SPACE
using Exec = OMGS_TEST_EXEC_SPACE;
#else
using Exec = Kokkos::DefaultExecutionSpace;
#endif
using Selector = omgs::TopkSelector<Exec>;
using FloatView = Kokkos::View<float*, Exec::memory_space>;
using IndexView = Kokkos::View<std::uint32_t*, Exec::memory_space>;

inline std::uint32_t bits_of(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

/// Reference: sort by (|x| descending, index ascending), keep k, return ascending indices.
/// The composite 64-bit key is unique per entry, so std::sort equals a stable sort.
inline std::vector<std::uint32_t> reference_topk(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint64_t> keys(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint64_t mag = bits_of(std::fabs(x[i]));
    keys[i] = ((0xffffffffull - mag) << 32) | i;
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::uint32_t> idx(k);
  for (std::size_t j = 0; j < k; ++j) idx[j] = static_cast<std::uint32_t>(keys[j] & 0xffffffffu);
  std::sort(idx.begin(), idx.end());
  return idx;
}

inline FloatView to_device(const std::vector<float>& v, const char* label = "x") {
  FloatView d(std::string(label), v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}

template <class View>
inline std::vector<typename View::non_const_value_type> to_host(const View& d, std::size_t count) {
  auto h = Kokkos::create_mirror_view(d);
  Kokkos::deep_copy(h, d);
  std::vector<typename View::non_const_value_type> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = h(i);
  return v;
}

struct Selection {
  omgs::TopkResult result;
  std::vector<std::uint32_t> index;
  std::vector<float> value;
};

inline Selection run_select(Selector& sel, const std::vector<float>& x, std::size_t k) {
  const FloatView dx = to_device(x);
  IndexView oi("oi", k);
  FloatView ov("ov", k);
  Selection s;
  s.result = sel.select(dx, k, oi, ov);
  Exec().fence();
  s.index = to_host(oi, k);
  s.value = to_host(ov, k);
  return s;
}

/// Checks a selection of x against the reference: same indices, values bitwise equal to x.
inline void check_against_reference(const std::vector<float>& x, std::size_t k,
                                    const Selection& s) {
  REQUIRE(s.result.ok());
  REQUIRE(s.result.selected == k);
  REQUIRE(s.result.nonfinite == 0);
  const std::vector<std::uint32_t> ref = reference_topk(x, k);
  REQUIRE(s.index.size() == ref.size());
  std::size_t mismatches = 0, first = k;
  for (std::size_t j = 0; j < k; ++j) {
    if (s.index[j] != ref[j] || bits_of(s.value[j]) != bits_of(x[ref[j]])) {
      if (mismatches++ == 0) first = j;
    }
  }
  INFO("n = " << x.size() << ", k = " << k << ", first mismatch at output " << first);
  REQUIRE(mismatches == 0);
}

enum class Dist {
  normal,
  uniform,
  all_equal,
  many_zeros,
  negative_only,
  denormals,
  huge_range,
  powers_of_two
};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal:
      return "normal";
    case Dist::uniform:
      return "uniform";
    case Dist::all_equal:
      return "all equal";
    case Dist::many_zeros:
      return "many zeros";
    case Dist::negative_only:
      return "negative only";
    case Dist::denormals:
      return "denormals";
    case Dist::huge_range:
      return "huge range";
    case Dist::powers_of_two:
      return "powers of two";
  }
  return "?";
}

inline std::vector<float> make_data(Dist d, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (d) {
      case Dist::normal:
        x[i] = normal(rng);
        break;
      case Dist::uniform:
        x[i] = uni(rng);
        break;
      case Dist::all_equal:
        x[i] = (i % 2 == 0) ? 0.5f : -0.5f;
        break;
      case Dist::many_zeros:
        x[i] = (rng() % 10 == 0) ? normal(rng) : ((rng() % 2) ? 0.0f : -0.0f);
        break;
      case Dist::negative_only:
        x[i] = -std::fabs(normal(rng)) - 1e-3f;
        break;
      case Dist::denormals: {
        // Subnormal floats (and some zeros), with a few repeated values.
        const std::uint32_t mant = rng() % 0x800u;  // few distinct values: ties
        std::uint32_t u = mant | ((rng() & 1u) << 31);
        float v;
        std::memcpy(&v, &u, sizeof v);
        x[i] = v;
        break;
      }
      case Dist::huge_range: {
        const float e = static_cast<float>(static_cast<int>(rng() % 250) - 125);
        x[i] = std::ldexp(uni(rng), static_cast<int>(e));
        break;
      }
      case Dist::powers_of_two: {
        const int e = static_cast<int>(rng() % 20) - 10;
        x[i] = (rng() & 1u ? -1.0f : 1.0f) * std::ldexp(1.0f, e);
        break;
      }
    }
  }
  return x;
}

inline std::vector<std::size_t> k_values(std::size_t n) {
  std::vector<std::size_t> ks = {0, 1, n / 100 + 1, n / 2, n > 0 ? n - 1 : 0, n};
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  while (!ks.empty() && ks.back() > n) ks.pop_back();
  return ks;
}

/// The feedback identity: for every element, the new residual is bitwise +0 where acc was
/// selected and acc elsewhere, so selected + new residual == acc exactly (up to the sign of a
/// zero).
inline void check_new_residual(const std::vector<float>& acc, const Selection& s,
                               const std::vector<float>& new_res) {
  const std::size_t n = acc.size();
  std::vector<float> selected(n, 0.0f);
  std::vector<char> is_sel(n, 0);
  for (std::size_t j = 0; j < s.index.size(); ++j) {
    selected[s.index[j]] = s.value[j];
    is_sel[s.index[j]] = 1;
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool ok_res =
        is_sel[i] ? bits_of(new_res[i]) == bits_of(0.0f) : bits_of(new_res[i]) == bits_of(acc[i]);
    const float sum = selected[i] + new_res[i];
    // Bitwise, except that -0 + 0 = +0 may differ in sign from acc = -0.
    const bool ok_sum = bits_of(sum) == bits_of(acc[i]) || (sum == 0.0f && acc[i] == 0.0f);
    if (!ok_res || !ok_sum) ++bad;
  }
  INFO("n = " << n << ", k = " << s.index.size());
  REQUIRE(bad == 0);
}

inline std::vector<float> sum_of(const std::vector<float>& residual,
                                 const std::vector<float>& grad) {
  std::vector<float> acc(grad.size());
  for (std::size_t i = 0; i < grad.size(); ++i) acc[i] = residual[i] + grad[i];
  return acc;
}

/// Runs the feedback form and checks: selection equals the reference on acc = residual +
/// grad; selected values and new residual are bitwise acc / 0 at the selected entries and
/// 0 / acc elsewhere (so selected + new residual == old residual + grad, exactly).
inline void check_feedback(Selector& sel, const std::vector<float>& grad,
                           const std::vector<float>& residual, std::size_t k) {
  const std::size_t n = grad.size();
  const std::vector<float> acc = sum_of(residual, grad);
  const FloatView dg = to_device(grad, "grad");
  const FloatView dr = to_device(residual, "residual");
  IndexView oi("oi", k);
  FloatView ov("ov", k);
  const omgs::TopkResult r = sel.select_with_feedback(dg, dr, k, oi, ov);
  Exec().fence();
  Selection s{r, to_host(oi, k), to_host(ov, k)};
  check_against_reference(acc, k, s);
  check_new_residual(acc, s, to_host(dr, n));
}

/// The one-read form (residual_in -> residual_out): the same checks, every entry of
/// residual_out written (it starts as NaN), residual_in bitwise unchanged. Returns the new
/// residual.
inline std::vector<float> check_feedback_out_of_place(Selector& sel, const std::vector<float>& grad,
                                                      const std::vector<float>& residual,
                                                      std::size_t k) {
  const std::size_t n = grad.size();
  const std::vector<float> acc = sum_of(residual, grad);
  const FloatView dg = to_device(grad, "grad");
  const FloatView din = to_device(residual, "residual_in");
  const FloatView dout = to_device(std::vector<float>(n, std::nanf("")), "residual_out");
  IndexView oi("oi", k);
  FloatView ov("ov", k);
  const omgs::TopkResult r = sel.select_with_feedback(dg, din, dout, k, oi, ov);
  Exec().fence();
  Selection s{r, to_host(oi, k), to_host(ov, k)};
  check_against_reference(acc, k, s);
  const std::vector<float> new_res = to_host(dout, n);
  check_new_residual(acc, s, new_res);
  const std::vector<float> in_after = to_host(din, n);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < n; ++i)
    changed += bits_of(in_after[i]) != bits_of(residual[i]) ? 1 : 0;
  REQUIRE(changed == 0);
  return new_res;
}

/// The sampled path's sample size for n entries.
inline std::size_t sample_size(std::size_t n) {
  return static_cast<std::size_t>(omgs::detail::select_sample_size(static_cast<std::int64_t>(n)));
}

/// A forced sample rank that brackets the k-th entry well (40 sample entries above the
/// expected rank): the sampled path itself, even when forced.
inline std::int64_t rank_just_right(std::size_t n, std::size_t k) {
  return static_cast<std::int64_t>(k * sample_size(n) / n) + 40;
}

/// x with one huge outlier, many ties at the threshold, +-0 and denormals mixed in.
inline std::vector<float> adversarial(std::size_t n, std::uint32_t seed) {
  std::vector<float> x = make_data(Dist::normal, n, seed);
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = rng() % 16;
    if (u < 3) x[i] = (u == 0) ? 0.0f : -0.0f;
    if (u == 3) x[i] = (rng() & 1u) ? 2.0f : -2.0f;  // a large tie class near the threshold
    if (u == 4) x[i] = std::ldexp(1.0f, -140);       // denormal
  }
  x[n / 3] = 3e38f;  // one huge outlier
  return x;
}

}  // namespace select_test
