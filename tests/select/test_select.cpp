// Tests of module select: top-k by magnitude (exact, lowest index wins ties, output by
// ascending index), the fused error-feedback form, non-finite counting, buffer reuse and
// bad arguments. Every case is checked against a reference sort by (|x| desc, index asc).
#include "select_reference.hpp"

#include <cstdio>
#include <limits>
#include <type_traits>

using namespace select_test;

namespace {
// Printed before Catch2 runs (this program is built once per Kokkos backend), so that
// CTest's log says which execution space select ran on, whichever tests were chosen.
[[maybe_unused]] const bool announced = [] {
  std::printf("omgs-test-select: TopkSelector on execution space %s\n", Exec::name());
  return std::fflush(stdout) == 0;
}();
}  // namespace

TEST_CASE("select: the selector runs on the execution space under test", "[select][backend]") {
  STATIC_REQUIRE(std::is_same<Selector::execution_space, Exec>::value);
  Selector sel(16);
  REQUIRE(std::string(sel.execution_space_instance().name()) == Exec::name());
}

TEST_CASE("select: matches the reference on every distribution, size and k", "[select]") {
  const std::vector<Dist> dists = {Dist::normal,     Dist::uniform,       Dist::all_equal,
                                   Dist::many_zeros, Dist::negative_only, Dist::denormals,
                                   Dist::huge_range, Dist::powers_of_two};
  // 16383/16385: either side of the one-team limit; 50001, 100003: several teams and no
  // multiple of any team size.
  const std::vector<std::size_t> sizes = {1, 2, 7, 1000, 16383, 16385, 50001, 100003};
  Selector fast(100003);
  // A tiny candidate buffer and max_k force the slow path (full passes for every digit).
  Selector slow(100003, 1, 1);
  std::uint32_t seed = 1;
  for (Dist d : dists) {
    for (std::size_t n : sizes) {
      const std::vector<float> x = make_data(d, n, seed++);
      for (std::size_t k : k_values(n)) {
        INFO(dist_name(d) << ", n = " << n << ", k = " << k);
        check_against_reference(x, k, run_select(fast, x, k));
        check_against_reference(x, k, run_select(slow, x, k));
      }
    }
  }
}

TEST_CASE("select: large inputs (1e6, 1e7) at densities 0.001 and 0.01", "[select][large]") {
  Selector sel(10000000);
  for (std::size_t n : {std::size_t(1000003), std::size_t(10000000)}) {
    const std::vector<float> x = make_data(Dist::normal, n, 77);
    for (double density : {0.001, 0.01}) {
      const std::size_t k = static_cast<std::size_t>(std::ceil(density * n));
      INFO("n = " << n << ", k = " << k);
      check_against_reference(x, k, run_select(sel, x, k));
    }
  }
}

TEST_CASE("select: the one-shot select_topk matches the reference", "[select]") {
  const std::vector<float> x = make_data(Dist::normal, 30000, 5);
  const FloatView dx = to_device(x);
  IndexView oi("oi", 300);
  FloatView ov("ov", 300);
  const omgs::TopkResult r = omgs::select_topk(Exec(), FloatView::const_type(dx), 300, oi, ov);
  Selection s{r, to_host(oi, 300), to_host(ov, 300)};
  check_against_reference(x, 300, s);
}

TEST_CASE("select: empty input", "[select]") {
  Selector sel(10);
  const omgs::TopkResult r = sel.select(FloatView("x", 0), 0, IndexView("i", 0), FloatView("v", 0));
  REQUIRE(r.ok());
  REQUIRE(r.selected == 0);
}

TEST_CASE("select: error feedback conserves every element exactly", "[select][feedback]") {
  Selector fast(200000);
  Selector slow(200000, 1, 1);
  for (std::size_t n :
       {std::size_t(1), std::size_t(999), std::size_t(20000), std::size_t(200000)}) {
    std::vector<float> grad = make_data(Dist::normal, n, 11);
    std::vector<float> residual = make_data(Dist::huge_range, n, 12);
    for (std::size_t i = 0; i < n; i += 7) residual[i] = -grad[i];  // acc == 0 exactly
    for (std::size_t k : k_values(n)) {
      check_feedback(fast, grad, residual, k);
      check_feedback(slow, grad, residual, k);
    }
  }
}

TEST_CASE("select: error feedback over iterations loses no gradient mass", "[select][feedback]") {
  // Ten steps of residual <- top-k with feedback; each step checks the per-element identity.
  const std::size_t n = 50000, k = 500;
  Selector sel(n, k);
  std::vector<float> residual(n, 0.0f);
  for (std::uint32_t step = 0; step < 10; ++step) {
    const std::vector<float> grad = make_data(Dist::normal, n, 100 + step);
    check_feedback(sel, grad, residual, k);
    // Advance the host copy of the residual the same way the device did.
    std::vector<float> acc(n);
    for (std::size_t i = 0; i < n; ++i) acc[i] = residual[i] + grad[i];
    for (std::uint32_t i : reference_topk(acc, k)) acc[i] = 0.0f;
    residual = acc;
  }
}

TEST_CASE("select: non-finite input is counted and nothing is written", "[select][nonfinite]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t n : {std::size_t(10), std::size_t(70000)}) {
    Selector sel(n);
    std::vector<float> x = make_data(Dist::normal, n, 3);
    x[1] = nan;
    x[n / 2] = inf;
    x[n - 1] = -inf;
    const std::size_t k = 5;
    const FloatView dx = to_device(x);
    IndexView oi("oi", k);
    FloatView ov("ov", k);
    Kokkos::deep_copy(oi, 12345u);
    Kokkos::deep_copy(ov, 7.0f);
    const omgs::TopkResult r = sel.select(dx, k, oi, ov);
    Exec().fence();
    REQUIRE(r.status == omgs::TopkStatus::nonfinite_input);
    REQUIRE(r.nonfinite == 3);
    REQUIRE(r.selected == 0);
    for (std::uint32_t v : to_host(oi, k)) REQUIRE(v == 12345u);
    for (float v : to_host(ov, k)) REQUIRE(v == 7.0f);

    // Feedback form: finite grad and residual whose sum overflows, plus a NaN gradient.
    std::vector<float> grad = make_data(Dist::normal, n, 4);
    std::vector<float> residual(n, 0.25f);
    grad[2] = 3e38f;
    residual[2] = 3e38f;  // acc = +Inf
    grad[n - 2] = nan;
    const FloatView dg = to_device(grad, "grad");
    const FloatView dr = to_device(residual, "residual");
    const omgs::TopkResult rf = sel.select_with_feedback(dg, dr, k, oi, ov);
    Exec().fence();
    REQUIRE(rf.status == omgs::TopkStatus::nonfinite_input);
    REQUIRE(rf.nonfinite == 2);
    const std::vector<float> after = to_host(dr, n);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(bits_of(after[i]) == bits_of(residual[i]));
    for (std::uint32_t v : to_host(oi, k)) REQUIRE(v == 12345u);
  }
}

TEST_CASE("select: repeated calls reuse the buffers and stay correct", "[select]") {
  Selector sel(120000, 2000);
  std::mt19937 rng(9);
  for (int call = 0; call < 40; ++call) {
    const std::size_t n = 1 + rng() % 120000;
    const std::size_t k = rng() % (n < 2000 ? n + 1 : 2001);
    const Dist d = (call % 3 == 0) ? Dist::powers_of_two : Dist::normal;
    const std::vector<float> x = make_data(d, n, 1000 + call);
    INFO("call " << call << ": n = " << n << ", k = " << k);
    check_against_reference(x, k, run_select(sel, x, k));
  }
  // k above max_k still works (slow path).
  const std::vector<float> x = make_data(Dist::normal, 100000, 4242);
  check_against_reference(x, 50000, run_select(sel, x, 50000));
}

TEST_CASE("select: bad arguments give a status and leave the outputs alone", "[select][errors]") {
  Selector sel(100);
  const std::vector<float> host = make_data(Dist::normal, 100, 8);
  const FloatView x = to_device(host);
  IndexView oi("oi", 100);
  FloatView ov("ov", 100);
  Kokkos::deep_copy(oi, 77u);
  REQUIRE(sel.select(x, 101, oi, ov).status == omgs::TopkStatus::k_exceeds_n);
  REQUIRE(sel.select(FloatView("big", 101), 1, oi, ov).status ==
          omgs::TopkStatus::n_exceeds_capacity);
  REQUIRE(sel.select(x, 50, IndexView("small", 49), ov).status ==
          omgs::TopkStatus::output_too_small);
  REQUIRE(sel.select(x, 50, oi, FloatView("small", 49)).status ==
          omgs::TopkStatus::output_too_small);
  FloatView res("res", 99);
  REQUIRE(sel.select_with_feedback(x, res, 5, oi, ov).status == omgs::TopkStatus::shape_mismatch);
  for (std::uint32_t v : to_host(oi, 100)) REQUIRE(v == 77u);
  REQUIRE(std::string(omgs::to_string(omgs::TopkStatus::nonfinite_input)).find("non-finite") !=
          std::string::npos);
  REQUIRE(std::string(omgs::to_string(omgs::TopkStatus::ok)) == "ok");

  // The one-shot function throws on bad arguments.
  REQUIRE_THROWS_AS(omgs::select_topk(Exec(), FloatView::const_type(x), 101, oi, ov), omgs::Error);
  REQUIRE_THROWS_AS(omgs::select_topk(Exec(), FloatView::const_type(x), 50, IndexView("s", 10), ov),
                    omgs::Error);
  // Construction past the 32-bit index limit throws before allocating anything.
  if (sizeof(std::size_t) > 4) {
    REQUIRE_THROWS_AS(Selector(std::size_t(1) << 33), omgs::Error);
  }
  REQUIRE(sel.max_n() == 100);
  REQUIRE(sel.max_k() == 100);
  REQUIRE(sel.candidate_capacity() == 100);
}
