// The 16-bit value codes of the compact pair format (detail/pair_format_values.hpp) against
// references: fp16 against the compiler's _Float16 where it has one (round to nearest even,
// subnormals), bf16 against the nearest of the two truncation neighbours in double; the
// saturation at the largest finite value, NaN and Inf; and the layout's limits and bytes
// per pair (at most 4 for bf16 at densities 0.001 and 0.01).
#include <omgs/pair_format.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "select_reference.hpp"

namespace {

namespace p = omgs::detail::pairs;
using omgs::WireValues;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// bf16 reference: the nearer of the two bf16 neighbours of x, ties to the even one.
std::uint16_t bf16_reference(float x) {
  const std::uint32_t u = select_test::bits_of(x);
  const std::uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  const double dlo = std::fabs(double(from_bits(lo)) - x);
  const double dhi = std::fabs(double(from_bits(hi)) - x);
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0))
    return static_cast<std::uint16_t>(lo >> 16);
  return static_cast<std::uint16_t>(hi >> 16);
}

}  // namespace

TEST_CASE("pair values: bf16 rounds to nearest even, saturates, keeps NaN and Inf", "[pairs]") {
  std::size_t bad = 0;
  // Every 97th float bit pattern of the finite range below the saturation point.
  for (std::uint64_t u = 0; u < 0x7f7f8000u; u += 97) {
    for (std::uint32_t sign : {0u, 0x80000000u}) {
      const float x = from_bits(static_cast<std::uint32_t>(u) | sign);
      if (p::to_bf16(x) != bf16_reference(x)) ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(p::from_bf16(p::to_bf16(1.0f)) == 1.0f);
  const float max = std::numeric_limits<float>::max();
  CHECK(p::to_bf16(max) == 0x7f7f);  // would round to Inf: saturates
  CHECK(p::to_bf16(-max) == 0xff7f);
  CHECK(std::isinf(p::from_bf16(p::to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(p::from_bf16(p::to_bf16(std::nanf("")))));
}

TEST_CASE("pair values: fp16 rounds to nearest even with subnormals, saturates", "[pairs]") {
#if defined(__FLT16_MAX__)
  std::size_t bad = 0;
  for (std::uint64_t u = 0; u < 0x477ff000u; u += 37) {  // below the saturation point
    for (std::uint32_t sign : {0u, 0x80000000u}) {
      const float x = from_bits(static_cast<std::uint32_t>(u) | sign);
      const _Float16 ref = static_cast<_Float16>(x);
      std::uint16_t rb;
      std::memcpy(&rb, &ref, sizeof rb);
      if (p::to_fp16(x) != rb || p::from_fp16(rb) != static_cast<float>(ref)) ++bad;
    }
  }
  CHECK(bad == 0);
#endif
  CHECK(p::from_fp16(p::to_fp16(65504.0f)) == 65504.0f);
  CHECK(p::from_fp16(p::to_fp16(65519.0f)) == 65504.0f);
  CHECK(p::from_fp16(p::to_fp16(65520.0f)) == 65504.0f);  // would be Inf: saturates
  CHECK(p::from_fp16(p::to_fp16(-1e30f)) == -65504.0f);
  CHECK(p::from_fp16(p::to_fp16(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));
  CHECK(p::from_fp16(p::to_fp16(std::ldexp(1.0f, -25))) == 0.0f);  // tie to even: zero
  CHECK(p::from_fp16(p::to_fp16(std::ldexp(3.0f, -26))) == std::ldexp(1.0f, -24));
  CHECK(std::isinf(p::from_fp16(p::to_fp16(-std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(p::from_fp16(p::to_fp16(std::nanf("")))));
}

TEST_CASE("pair layout: limits, sections, and bytes per pair", "[pairs]") {
  CHECK_THROWS_WITH(omgs::make_pair_layout(std::size_t(1) << 32, 10, WireValues::bf16),
                    Catch::Contains("2^32 - 1"));
  CHECK_THROWS_WITH(omgs::make_pair_layout(10, 11, WireValues::bf16), Catch::Contains("exceeds n"));
  CHECK_THROWS_WITH(omgs::make_pair_layout(10, 1, WireValues::bf16, 16),
                    Catch::Contains("chunk_bits"));
  CHECK_THROWS_WITH(omgs::parse_wire_values("fp8"), Catch::Contains("fp8"));
  for (WireValues v : {WireValues::fp32, WireValues::bf16, WireValues::fp16})
    CHECK(omgs::parse_wire_values(omgs::to_string(v)) == v);
  // The largest group the format takes: its layout exists (indices up to 2^32 - 2).
  const omgs::PairLayout big = omgs::make_pair_layout(0xffffffffu, 4294967, WireValues::bf16);
  CHECK(big.chunks ==
        ((std::size_t(0xffffffffu) + (std::size_t(1) << big.chunk_bits) - 1) >> big.chunk_bits));
  CHECK(big.bytes_per_pair() <= 4.0);
  for (std::size_t n : {std::size_t(1) << 20, std::size_t(25557032), std::size_t(100000000)}) {
    for (double d : {0.001, 0.01}) {
      const std::size_t k = static_cast<std::size_t>(d * double(n));
      const omgs::PairLayout l = omgs::make_pair_layout(n, k, WireValues::bf16);
      INFO("n = " << n << " d = " << d << " b = " << l.chunk_bits);
      CHECK(l.bytes_per_pair() <= 4.0);
      CHECK(l.words % 2 == 0);
      CHECK(l.offset_word >= l.value_word + (k * 2 + 3) / 4);
      const omgs::PairLayout f32 = omgs::make_pair_layout(n, k, WireValues::fp32);
      CHECK(f32.bytes_per_pair() < 8.0);
    }
  }
}
