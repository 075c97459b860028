// The resolve's range levels (detail/select_range.hpp) against a sort: the key T of the
// need-th largest entry and the ties t taken, for every gather capacity (none: all levels
// on the list; small: the bin is gathered late, or directly ranked; large: gathered after
// the first level) on narrow, wide, tied and denormal inputs.
#include <omgs/detail/select_range.hpp>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "select_reference.hpp"

namespace {

using HostFloats = Kokkos::View<float*, Kokkos::HostSpace>;
using HostU32 = Kokkos::View<std::uint32_t*, Kokkos::HostSpace>;

struct KthKey {
  std::uint32_t T = 0, t = 0;
};

KthKey reference(const std::vector<float>& x, std::uint32_t need) {
  std::vector<std::uint32_t> keys;
  for (float v : x) keys.push_back(omgs::detail::magnitude_key(v));
  std::sort(keys.begin(), keys.end(), std::greater<std::uint32_t>());
  KthKey r;
  r.T = keys[need - 1];
  for (std::uint32_t i = 0; i < need; ++i) r.t += keys[i] == r.T ? 1 : 0;
  return r;
}

KthKey range_kth(const std::vector<float>& x, std::uint32_t bound, std::uint32_t need,
                 std::size_t gather_cap) {
  HostFloats v("v", x.size()), gather("gather", gather_cap);
  for (std::size_t i = 0; i < x.size(); ++i) v(i) = x[i];
  HostU32 h("h", omgs::detail::select_bins1);
  const omgs::detail::ValueList<Kokkos::HostSpace> list{v, static_cast<std::int64_t>(x.size())};
  KthKey r;
  omgs::detail::host_range_kth_key(list, h, bound, need, gather, r.T, r.t);
  return r;
}

/// Every need in `needs`, every gather capacity, bound = the smallest key and 0.
void check(const std::vector<float>& x, const std::vector<std::uint32_t>& needs) {
  std::uint32_t lowest = 0xffffffffu;
  for (float v : x) lowest = std::min(lowest, omgs::detail::magnitude_key(v));
  for (std::uint32_t need : needs) {
    const KthKey want = reference(x, need);
    for (std::size_t cap : {std::size_t(0), std::size_t(8), std::size_t(64), std::size_t(100),
                            std::size_t(1000), std::size_t(1) << 17}) {
      for (std::uint32_t bound : {lowest, 0u}) {
        INFO("n " << x.size() << " need " << need << " gather " << cap << " bound " << bound);
        const KthKey got = range_kth(x, bound, need, cap);
        REQUIRE(got.T == want.T);
        REQUIRE(got.t == want.t);
      }
    }
  }
}

std::vector<std::uint32_t> needs_for(std::size_t n) {
  std::vector<std::uint32_t> v = {1,
                                  2,
                                  static_cast<std::uint32_t>(n / 100 + 1),
                                  static_cast<std::uint32_t>(n / 2),
                                  static_cast<std::uint32_t>(n - 1),
                                  static_cast<std::uint32_t>(n)};
  v.erase(std::remove(v.begin(), v.end(), 0u), v.end());
  return v;
}

}  // namespace

TEST_CASE("range levels: bit_length", "[select][range]") {
  using omgs::detail::bit_length;
  CHECK(bit_length(0) == 0);
  CHECK(bit_length(1) == 1);
  CHECK(bit_length(2047) == 11);
  CHECK(bit_length(2048) == 12);
  CHECK(bit_length(0x7fffffffu) == 31);
}

TEST_CASE("range levels: the threshold of a candidate list matches a sort", "[select][range]") {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  SECTION("a narrow bracket: the tail of a normal sample") {
    std::vector<float> x;
    while (x.size() < 20000) {
      const float v = nd(gen);
      if (std::fabs(v) >= 2.3f) x.push_back(v);
    }
    check(x, needs_for(x.size()));
  }
  SECTION("wide range: zeros, denormals, FLT_MAX and -FLT_MAX") {
    std::vector<float> x(5000);
    for (float& v : x) v = nd(gen) * std::exp(4.0f * nd(gen));
    x[3] = FLT_MAX;
    x[10] = -FLT_MAX;
    x[11] = 0.0f;
    x[12] = -0.0f;
    x[13] = FLT_MIN / 4;
    x[14] = -FLT_MIN / 1024;
    check(x, needs_for(x.size()));
  }
  SECTION("all equal, and +0 / -0 only") {
    check(std::vector<float>(3000, -1.5f), needs_for(3000));
    std::vector<float> z(2000, 0.0f);
    for (std::size_t i = 0; i < z.size(); i += 3) z[i] = -0.0f;
    check(z, needs_for(z.size()));
  }
  SECTION("many ties at the threshold, a few entries above and below") {
    std::vector<float> x(4000, 2.0f);
    for (std::size_t i = 0; i < x.size(); i += 7) x[i] = 3.0f + static_cast<float>(i);
    for (std::size_t i = 1; i < x.size(); i += 11) x[i] = -1.0f;
    check(x, needs_for(x.size()));
  }
  SECTION("neighbouring keys: every bin of the last level") {
    std::vector<float> x;
    const float base = 1.0f;
    std::uint32_t b = 0;
    std::memcpy(&b, &base, sizeof b);
    for (std::uint32_t i = 0; i < 6000; ++i) {
      const std::uint32_t u = b + (i * 2654435761u) % 4096;
      float v = 0;
      std::memcpy(&v, &u, sizeof v);
      x.push_back(i % 2 ? v : -v);
    }
    check(x, needs_for(x.size()));
  }
}
