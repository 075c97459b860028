// The compact pair format (omgs/pair_format.hpp) on the backend under test: round trips
// (exact for fp32, within half an ulp of the wire type for bf16 / fp16), conservation
// (residual + decoded == residual before + value, bitwise, for every value type), chunk
// boundaries, empty chunks, a chunk entirely kept, k = 0, groups not a multiple of the
// chunk, several blocks decoded together, the failure marker, the 16-bit codes against
// references, and the layout's limits and bytes per pair.
#include <omgs/pair_format.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "select_reference.hpp"

namespace {

using select_test::Exec;
using select_test::FloatView;
using select_test::IndexView;
using select_test::to_host;
using WordView = Kokkos::View<std::uint32_t*, Exec::memory_space>;
using StartView = Kokkos::View<std::size_t*, Exec::memory_space>;
using omgs::WireValues;

constexpr WireValues all_values[] = {WireValues::fp32, WireValues::bf16, WireValues::fp16};

IndexView index_to_device(const std::vector<std::uint32_t>& v) {
  IndexView d("idx", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}

/// The pairs of one block: ascending indices and their values.
struct Pairs {
  std::vector<std::uint32_t> index;
  std::vector<float> value;
};

Pairs random_pairs(std::size_t n, std::size_t k, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = static_cast<std::uint32_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  Pairs p;
  p.index.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
  std::sort(p.index.begin(), p.index.end());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < k; ++i) p.value.push_back(normal(rng) * std::exp(2.0f * normal(rng)));
  return p;
}

/// Encodes p (with a residual that starts as `resid0`), decodes it into zeros; returns the
/// decoded vector and the residual after encoding.
struct RoundTrip {
  std::vector<float> decoded, resid;
};

RoundTrip round_trip(const omgs::PairLayout& l, const Pairs& p, const std::vector<float>& resid0) {
  const IndexView idx = index_to_device(p.index);
  const FloatView val = select_test::to_device(p.value, "val");
  const FloatView resid = select_test::to_device(resid0, "resid");
  WordView words("words", l.words);
  StartView starts("starts", l.chunks);
  FloatView out("out", l.n);
  omgs::encode_pairs(Exec(), l, idx, val, resid, words);
  omgs::decode_pairs(Exec(), l, words, 1, starts, out);
  Exec().fence();
  return {to_host(out, l.n), to_host(resid, l.n)};
}

/// Half an ulp of the wire type, relative (normal range), and the absolute floor (fp16's
/// subnormal spacing / 2).
double rel_bound(WireValues v) {
  return v == WireValues::fp32   ? 0.0
         : v == WireValues::bf16 ? std::ldexp(1.0, -8)
                                 : std::ldexp(1.0, -11);
}

void check_round_trip(const omgs::PairLayout& l, const Pairs& p) {
  std::vector<float> resid0(l.n, 0.0f);
  for (std::size_t i = 0; i < l.n; ++i) resid0[i] = (i % 7 == 0) ? 0.25f : 0.0f;
  for (std::uint32_t j : p.index) resid0[j] = 0.0f;  // as after a selection
  const RoundTrip t = round_trip(l, p, resid0);
  std::vector<float> expect(l.n, 0.0f);
  for (std::size_t i = 0; i < p.index.size(); ++i) expect[p.index[i]] = p.value[i];
  std::size_t bad_value = 0, bad_mass = 0;
  for (std::size_t j = 0; j < l.n; ++j) {
    const double err = std::fabs(double(t.decoded[j]) - double(expect[j]));
    if (err > rel_bound(l.values) * std::fabs(double(expect[j])) + std::ldexp(1.0, -25))
      ++bad_value;
    if (l.values == WireValues::fp32 && t.decoded[j] != expect[j]) ++bad_value;
    // Conservation, bitwise: what was sent plus what stayed is what there was.
    if (t.resid[j] + t.decoded[j] != resid0[j] + expect[j]) ++bad_mass;
  }
  INFO(omgs::to_string(l.values) << " n = " << l.n << " k = " << l.k << " b = " << l.chunk_bits);
  CHECK(bad_value == 0);
  CHECK(bad_mass == 0);
}

}  // namespace

TEST_CASE("pair format: random groups round-trip and conserve mass", "[pairs]") {
  for (WireValues v : all_values) {
    for (std::size_t n :
         {std::size_t(1), std::size_t(1000), std::size_t(100003), std::size_t(1) << 20}) {
      for (double d : {0.001, 0.01, 0.3, 1.0}) {
        const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(d * n));
        check_round_trip(omgs::make_pair_layout(n, k, v),
                         random_pairs(n, k, 7u + static_cast<std::uint32_t>(n)));
      }
    }
  }
}

TEST_CASE("pair format: chunk boundaries, empty chunks, a full chunk, a partial last chunk",
          "[pairs]") {
  const std::size_t n = 5 * 256 + 17;  // chunks of 256 (b = 8); the last one partial
  Pairs p;
  for (std::uint32_t j = 256; j < 512; ++j) p.index.push_back(j);  // chunk 1 entirely kept
  for (std::uint32_t j : {767u, 768u, 1279u, 1280u, static_cast<std::uint32_t>(n - 1)})
    p.index.push_back(j);  // chunk 0, 4 empty; boundaries of 2 / 3 / 4 / 5
  for (std::size_t i = 0; i < p.index.size(); ++i) p.value.push_back(1.0f + 0.001f * float(i));
  for (WireValues v : all_values) {
    const omgs::PairLayout l = omgs::make_pair_layout(n, p.index.size(), v, 8);
    REQUIRE(l.chunks == 6);
    check_round_trip(l, p);
  }
  // All pairs in one chunk of a one-chunk group, and every entry of a group kept.
  Pairs all;
  for (std::uint32_t j = 0; j < 300; ++j) {
    all.index.push_back(j);
    all.value.push_back(-0.5f * float(j));
  }
  for (WireValues v : all_values) {
    check_round_trip(omgs::make_pair_layout(300, 300, v, 9), all);
    check_round_trip(omgs::make_pair_layout(300, 300, v), all);
  }
}

TEST_CASE("pair format: k = 0 is an empty block, encode and decode do nothing", "[pairs]") {
  for (WireValues v : all_values) {
    const omgs::PairLayout l = omgs::make_pair_layout(1000, 0, v);
    CHECK(l.words == 0);
    CHECK(l.bytes_per_pair() == 0.0);
    const RoundTrip t = round_trip(l, Pairs{}, std::vector<float>(1000, 1.0f));
    CHECK(std::all_of(t.decoded.begin(), t.decoded.end(), [](float x) { return x == 0.0f; }));
    CHECK(std::all_of(t.resid.begin(), t.resid.end(), [](float x) { return x == 1.0f; }));
  }
}

TEST_CASE("pair format: several blocks decode together, scaled", "[pairs]") {
  const std::size_t n = 70000, k = 700;
  const int blocks = 3;
  for (WireValues v : all_values) {
    const omgs::PairLayout l = omgs::make_pair_layout(n, k, v);
    WordView words("words", l.words * blocks);
    std::vector<double> expect(n, 0.0), magnitude(n, 0.0);
    for (int r = 0; r < blocks; ++r) {
      const Pairs p = random_pairs(n, k, 100u + static_cast<std::uint32_t>(r));
      auto block = Kokkos::subview(words, std::make_pair(l.words * r, l.words * (r + 1)));
      omgs::encode_pairs(Exec(), l, index_to_device(p.index), select_test::to_device(p.value),
                         FloatView(), block);
      for (std::size_t i = 0; i < k; ++i) {
        expect[p.index[i]] += 0.5 * p.value[i];
        magnitude[p.index[i]] += 0.5 * std::fabs(p.value[i]);
      }
    }
    StartView starts("starts", l.chunks * blocks);
    FloatView out("out", n);
    omgs::decode_pairs(Exec(), l, words, blocks, starts, out, 0.5f);
    Exec().fence();
    const std::vector<float> got = to_host(out, n);
    std::size_t bad = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (std::fabs(got[j] - expect[j]) > (rel_bound(v) + 1e-6) * magnitude[j]) ++bad;
    INFO(omgs::to_string(v));
    CHECK(bad == 0);
  }
}

TEST_CASE("pair format: a failed block is the marker and leaves the residual", "[pairs]") {
  const Pairs p = random_pairs(5000, 50, 3);
  const omgs::PairLayout l = omgs::make_pair_layout(5000, 50, WireValues::bf16);
  WordView words("words", l.words);
  const FloatView resid = select_test::to_device(std::vector<float>(5000, 2.0f), "resid");
  omgs::encode_pairs(Exec(), l, index_to_device(p.index), select_test::to_device(p.value), resid,
                     words, true);
  Exec().fence();
  const auto w = to_host(words, l.words);
  CHECK(omgs::is_failed_block(w[0]));
  const auto r = to_host(resid, 5000);
  CHECK(std::all_of(r.begin(), r.end(), [](float x) { return x == 2.0f; }));
  // No valid block starts with the marker: counts are at most 2^15.
  const omgs::PairLayout full = omgs::make_pair_layout(1 << 16, 1 << 16, WireValues::fp32);
  CHECK(full.chunk_bits <= 15);
}
