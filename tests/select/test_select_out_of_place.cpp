// Tests of the one-read feedback form, select_with_feedback(grad, residual_in, residual_out,
// ...) (docs/select.md): the selection equals the reference sort on acc = residual_in + grad,
// residual_out is bitwise acc with the selected entries +0, residual_in is never written, on
// every path (small, sampled, radix, both fallbacks, the slow radix path), and a non-finite
// acc leaves residual_in and the outputs unchanged.
#include <limits>

#include "select_reference.hpp"

using namespace select_test;

namespace {

/// Residuals that make acc adversarial: huge magnitudes, and acc == 0 exactly at every
/// fifth entry (residual = -grad).
std::vector<float> residual_for(const std::vector<float>& grad, std::uint32_t seed) {
  std::vector<float> residual = make_data(Dist::huge_range, grad.size(), seed);
  for (std::size_t i = 0; i < grad.size(); i += 5) residual[i] = -grad[i];
  return residual;
}

/// A forced sample rank whose bound misses for k: the sample's maximum (about n / s entries
/// at or above it, too few for k >= 4 n / s), else its minimum (nearly every entry a
/// candidate: the segments overflow where n exceeds the candidate buffer).
std::int64_t fallback_rank(std::size_t n, std::size_t k) {
  return k >= 4 * (n / sample_size(n)) ? 1 : std::int64_t(1) << 20;
}

/// residual_out at float offsets 0..3 of a buffer (the bracket pass's aligned entry and chunk
/// ends move), with the sampled path (rank 0: it must hold) and a fallback forced after the
/// bracket pass; every result checked against the reference sort. k_of(offset) gives k.
template <class K>
void check_every_alignment(Selector& sel, const std::vector<float>& grad,
                           const std::vector<float>& residual, const K& k_of) {
  const std::size_t n = grad.size();
  const std::vector<float> acc = sum_of(residual, grad);
  const FloatView dg = to_device(grad, "grad");
  const FloatView din = to_device(residual, "residual_in");
  FloatView buffer("residual_out buffer", n + 3);
  for (std::size_t offset = 0; offset < 4; ++offset) {
    const FloatView dout = Kokkos::subview(buffer, std::make_pair(offset, offset + n));
    const std::size_t k = k_of(offset);
    for (std::int64_t rank : {std::int64_t(0), fallback_rank(n, k)}) {
      INFO("n = " << n << ", offset " << offset << ", k = " << k << ", forced rank " << rank);
      sel.force_sample_rank(rank);
      Kokkos::deep_copy(buffer, std::nanf(""));
      IndexView oi("oi", k);
      FloatView ov("ov", k);
      const omgs::TopkResult r = sel.select_with_feedback(dg, din, dout, k, oi, ov);
      Exec().fence();
      REQUIRE(sel.last_path() ==
              (rank == 0 ? omgs::TopkPath::sampled : omgs::TopkPath::radix_fallback));
      Selection s{r, to_host(oi, k), to_host(ov, k)};
      check_against_reference(acc, k, s);
      check_new_residual(acc, s, to_host(dout, n));
    }
  }
  sel.force_sample_rank(0);
}

}  // namespace

TEST_CASE("one-read feedback: every distribution, size around the limits, and k",
          "[select][feedback][out_of_place]") {
  const std::vector<Dist> dists = {Dist::normal,     Dist::uniform,       Dist::all_equal,
                                   Dist::many_zeros, Dist::negative_only, Dist::denormals,
                                   Dist::huge_range, Dist::powers_of_two};
  // 4096, 8191..8193: the one-team limit; 16383/16385/65537: team chunks of the bracket
  // pass; 32799: its 32-entry blocks plus a tail.
  const std::vector<std::size_t> sizes = {1,    2,    7,     1000,  4096,  8191,
                                          8192, 8193, 16383, 16385, 32799, 65537};
  Selector fast(65537);
  Selector slow(65537, 1, 1);  // tiny candidate buffer and max_k: the slow radix path
  std::uint32_t seed = 500;
  for (Dist d : dists) {
    for (std::size_t n : sizes) {
      const std::vector<float> grad = make_data(d, n, seed++);
      const std::vector<float> zero(n, 0.0f);
      const std::vector<float> residual = d == Dist::all_equal ? zero : residual_for(grad, seed++);
      for (std::size_t k :
           {std::size_t(0), std::size_t(1), n / 1000 + 1, n / 100 + 1, n > 0 ? n - 1 : 0, n}) {
        if (k > n) continue;
        INFO(dist_name(d) << ", n = " << n << ", k = " << k);
        check_feedback_out_of_place(fast, grad, zero, k);
        check_feedback_out_of_place(fast, grad, residual, k);
        check_feedback_out_of_place(slow, grad, residual, k);
      }
    }
  }
}

TEST_CASE("one-read feedback: the paths taken, and brackets that miss in both directions",
          "[select][feedback][out_of_place]") {
  const std::size_t n = 120001;
  Selector sel(n);
  std::vector<float> grad = adversarial(n, 70);
  grad[n / 3] = 1e30f;  // keep acc finite
  const std::vector<float> residual = residual_for(grad, 71);
  check_feedback_out_of_place(sel, grad, residual, 300);
  REQUIRE(sel.last_path() == omgs::TopkPath::sampled);
  check_feedback_out_of_place(sel, grad, residual, n / 2);
  REQUIRE(sel.last_path() == omgs::TopkPath::radix);
  // Entries per sampled entry: about that many lie at or above the sample's maximum.
  const std::size_t per = n / sample_size(n);
  for (std::size_t k : {std::size_t(1), std::size_t(300), std::size_t(1200), 10 * per}) {
    INFO("k = " << k);
    sel.force_sample_rank(1);  // bound at the sample's maximum: too few candidates
    check_feedback_out_of_place(sel, grad, residual, k);
    if (k >= 10 * per) REQUIRE(sel.last_path() == omgs::TopkPath::radix_fallback);
    sel.force_sample_rank(1 << 20);  // bound at the sample's minimum: segments overflow
    check_feedback_out_of_place(sel, grad, residual, k);
    REQUIRE(sel.last_path() == omgs::TopkPath::radix_fallback);
    sel.force_sample_rank(rank_just_right(n, k));
    check_feedback_out_of_place(sel, grad, residual, k);
    REQUIRE(sel.last_path() == omgs::TopkPath::sampled);
  }
  sel.force_sample_rank(0);
  // All equal: every entry at the bound, the segments overflow: the fallback.
  check_feedback_out_of_place(sel, std::vector<float>(n, -0.5f), std::vector<float>(n, 0.0f), 200);
  REQUIRE(sel.last_path() == omgs::TopkPath::radix_fallback);
  check_feedback_out_of_place(sel, std::vector<float>(n, 0.0f), std::vector<float>(n, -0.0f), 200);
  REQUIRE(sel.last_path() == omgs::TopkPath::radix_fallback);
}

TEST_CASE("one-read feedback: large n streams residual_out, at every alignment",
          "[select][feedback][out_of_place][stream]") {
  // Above select_stream_min the bracket pass streams residual_out from its first 16-byte
  // aligned entry on; residual_out at float offsets 0..3 of a buffer moves that entry (and
  // the chunk ends handled one by one), a forced fallback rewrites what was streamed, and a
  // NaN in a streamed block must still be counted.
  constexpr std::size_t n = (std::size_t(1) << 22) + 77;  // constexpr: used, not captured
  REQUIRE(static_cast<std::int64_t>(n) > omgs::detail::select_stream_min);
  Selector sel(n);
  std::vector<float> grad = adversarial(n, 90);
  grad[n / 3] = 1e30f;  // keep acc finite
  const std::vector<float> residual = residual_for(grad, 91);
  check_every_alignment(sel, grad, residual, [](std::size_t offset) {
    return offset == 2 ? n / 1000 + 1 : n / 100 + 1;
  });
  grad[n / 2 + 5] = std::nanf("");  // inside a streamed block
  FloatView buffer("residual_out buffer", n + 1);
  const FloatView dout = Kokkos::subview(buffer, std::make_pair(std::size_t(1), n + 1));
  const FloatView din = to_device(residual, "residual_in");
  IndexView oi("oi", 10);
  FloatView ov("ov", 10);
  const omgs::TopkResult r =
      sel.select_with_feedback(to_device(grad, "grad"), din, dout, 10, oi, ov);
  REQUIRE(r.status == omgs::TopkStatus::nonfinite_input);
  REQUIRE(r.nonfinite == 1);
}

TEST_CASE("one-read feedback: mid-size inputs at every alignment of residual_out",
          "[select][feedback][out_of_place]") {
  Selector sel(200003);
  // Sizes around the team chunks and blocks, residual_out at float offsets 0..3, a forced
  // fallback; every result checked against the reference. At n = 200003 the sample's stride
  // (195) is a multiple of residual_for's period 5 (acc == 0 at every fifth entry): the
  // sampled path must still hold (the jittered sample).
  for (std::size_t n : {std::size_t(8193), std::size_t(16415), std::size_t(200003)}) {
    std::vector<float> grad = adversarial(n, 95);
    grad[n / 3] = 1e30f;  // keep acc finite
    check_every_alignment(sel, grad, residual_for(grad, 96),
                          [n](std::size_t) { return n / 100 + 1; });
  }
}

TEST_CASE("one-read feedback: sizes just below and above the streaming threshold",
          "[select][feedback][out_of_place][stream]") {
  // select_stream_min - 1 writes residual_out through the cache, the sizes from it on stream
  // it (a team's chunk end and its lead entries one by one): both at every alignment.
  const std::size_t t = static_cast<std::size_t>(omgs::detail::select_stream_min);
  Selector sel(t + 37);
  for (std::size_t n : {t - 1, t, t + 37}) {
    std::vector<float> grad = adversarial(n, 97);
    grad[n / 3] = 1e30f;  // keep acc finite
    check_every_alignment(sel, grad, residual_for(grad, 98), [n](std::size_t offset) {
      return offset == 1 ? n / 1000 + 1 : n / 100 + 1;
    });
  }
}

TEST_CASE("one-read feedback: swapping the buffers over iterations equals the in-place form",
          "[select][feedback][out_of_place]") {
  for (std::size_t n : {std::size_t(4096), std::size_t(50000)}) {
    const std::size_t k = n / 100 + 1;
    Selector sel(n, k);
    std::vector<float> in_place(n, 0.0f), swapped(n, 0.0f);
    const FloatView dr = to_device(in_place, "residual");
    for (std::uint32_t step = 0; step < 8; ++step) {
      const std::vector<float> grad = make_data(Dist::normal, n, 200 + step);
      swapped = check_feedback_out_of_place(sel, grad, swapped, k);
      IndexView oi("oi", k);
      FloatView ov("ov", k);
      REQUIRE(sel.select_with_feedback(to_device(grad, "grad"), dr, k, oi, ov).ok());
      Exec().fence();
      in_place = to_host(dr, n);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i)
        differ += bits_of(in_place[i]) != bits_of(swapped[i]) ? 1 : 0;
      INFO("n = " << n << ", step " << step);
      REQUIRE(differ == 0);
    }
  }
}

TEST_CASE("one-read feedback: non-finite acc leaves residual_in and the outputs unchanged",
          "[select][feedback][out_of_place][nonfinite]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t n : {std::size_t(10), std::size_t(4096), std::size_t(70000)}) {
    Selector sel(n);
    std::vector<float> grad = make_data(Dist::normal, n, 4);
    std::vector<float> residual(n, 0.25f);
    grad[2] = 3e38f;
    residual[2] = 3e38f;  // finite inputs, acc = +Inf
    grad[n - 2] = nan;
    const FloatView dg = to_device(grad, "grad");
    const FloatView din = to_device(residual, "residual_in");
    FloatView dout("residual_out", n);
    // k = 5: small or sampled path; n / 2: the radix path up front; forced ranks: the
    // sampled path with a bracket that would miss (the non-finite check comes first).
    for (std::size_t k : {std::size_t(5), n / 2}) {
      for (std::int64_t rank : {std::int64_t(0), std::int64_t(1), std::int64_t(1) << 20}) {
        sel.force_sample_rank(rank);
        IndexView oi("oi", k);
        FloatView ov("ov", k);
        Kokkos::deep_copy(oi, 12345u);
        Kokkos::deep_copy(ov, 7.0f);
        const omgs::TopkResult r = sel.select_with_feedback(dg, din, dout, k, oi, ov);
        Exec().fence();
        INFO("n = " << n << ", k = " << k << ", forced rank " << rank);
        REQUIRE(r.status == omgs::TopkStatus::nonfinite_input);
        REQUIRE(r.nonfinite == 2);
        REQUIRE(r.selected == 0);
        const std::vector<float> after = to_host(din, n);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(bits_of(after[i]) == bits_of(residual[i]));
        for (std::uint32_t v : to_host(oi, k)) REQUIRE(v == 12345u);
        for (float v : to_host(ov, k)) REQUIRE(v == 7.0f);
      }
    }
  }
}

TEST_CASE("one-read feedback: argument checks, and residual_out == residual_in is in place",
          "[select][feedback][out_of_place][errors]") {
  const std::size_t n = 100;
  Selector sel(n);
  const std::vector<float> grad = make_data(Dist::normal, n, 8);
  const FloatView dg = to_device(grad, "grad");
  FloatView both("both", 2 * n);
  IndexView oi("oi", n);
  FloatView ov("ov", n);
  const auto part = [&](std::size_t b) { return Kokkos::subview(both, std::make_pair(b, b + n)); };
  REQUIRE(sel.select_with_feedback(dg, part(0), part(50), 5, oi, ov).status ==
          omgs::TopkStatus::residual_overlap);
  REQUIRE(sel.select_with_feedback(dg, part(50), part(0), 5, oi, ov).status ==
          omgs::TopkStatus::residual_overlap);
  REQUIRE(sel.select_with_feedback(dg, part(0), FloatView("short", n - 1), 5, oi, ov).status ==
          omgs::TopkStatus::shape_mismatch);
  REQUIRE(sel.select_with_feedback(dg, FloatView("short", n - 1), part(0), 5, oi, ov).status ==
          omgs::TopkStatus::shape_mismatch);
  REQUIRE(sel.select_with_feedback(dg, part(0), part(n), n + 1, oi, ov).status ==
          omgs::TopkStatus::k_exceeds_n);
  REQUIRE(std::string(omgs::to_string(omgs::TopkStatus::residual_overlap)).find("overlap") !=
          std::string::npos);
  // Adjacent buffers do not overlap.
  REQUIRE(sel.select_with_feedback(dg, part(0), part(n), 5, oi, ov).ok());
  // The same buffer twice: the in-place form.
  const std::vector<float> residual = make_data(Dist::uniform, n, 9);
  const FloatView dr = to_device(residual, "residual");
  REQUIRE(sel.select_with_feedback(dg, dr, dr, 5, oi, ov).ok());
  Exec().fence();
  Selection s{omgs::TopkResult(), to_host(oi, 5), to_host(ov, 5)};
  const std::vector<float> acc = sum_of(residual, grad);
  check_new_residual(acc, s, to_host(dr, n));
}
