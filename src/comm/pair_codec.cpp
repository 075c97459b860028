// The compact pair format on the host, one block at a time (pair_codec.hpp).
#include "comm/pair_codec.hpp"

#include <algorithm>

namespace omgs::detail {

namespace pf = pairs;

WireValues wire_values(PairWire wire) {
  return wire == PairWire::bf16   ? WireValues::bf16
         : wire == PairWire::fp16 ? WireValues::fp16
                                  : WireValues::fp32;
}

float round_to_wire(PairWire wire, float v) {
  if (wire == PairWire::bf16) return pf::from_bf16(pf::to_bf16(v));
  if (wire == PairWire::fp16) return pf::from_fp16(pf::to_fp16(v));
  return v;
}

std::size_t block_words(std::uint64_t n, std::size_t count, WireValues values) {
  return make_pair_layout(static_cast<std::size_t>(n), count, values).words;
}

std::size_t blocks_words_bound(std::uint64_t n, std::size_t count, std::size_t blocks) {
  // Per block: (chunks + 1) / 2 count words with chunks <= (n_r >> 15) + 1, at most one
  // word per value, (15 c + 31) / 32 offset words and one of padding.
  return static_cast<std::size_t>(n >> 16) + 2 * count + 4 * blocks + 2;
}

void encode_block(const PairLayout& l, const SparsePair* pairs, std::uint64_t base,
                  std::uint32_t* words) {
  if (l.words == 0) return;
  std::fill(words, words + l.words, 0u);
  const std::uint64_t mask = (std::uint64_t{1} << l.chunk_bits) - 1;
  for (std::size_t i = 0; i < l.k; ++i) {
    const std::uint64_t local = pairs[i].index - base;
    const auto c = static_cast<std::size_t>(local >> l.chunk_bits);
    words[c / 2] += std::uint32_t{1} << (16 * (c % 2));
    const float v = pairs[i].value;
    if (l.values == WireValues::fp32) {
      words[l.value_word + i] = pf::float_bits(v);
    } else {
      const std::uint32_t h = l.values == WireValues::bf16 ? pf::to_bf16(v) : pf::to_fp16(v);
      words[l.value_word + i / 2] |= h << (16 * (i % 2));
    }
    // The offset's b bits, little-endian from bit i * b of the offsets.
    const std::uint64_t bit = std::uint64_t{i} * l.chunk_bits, off = local & mask;
    const std::size_t w = l.offset_word + static_cast<std::size_t>(bit / 32);
    const unsigned s = static_cast<unsigned>(bit % 32);
    words[w] |= static_cast<std::uint32_t>(off << s);
    if (s + l.chunk_bits > 32) words[w + 1] |= static_cast<std::uint32_t>(off >> (32 - s));
  }
}

void decode_block(const PairLayout& l, const std::uint32_t* words, std::uint64_t base,
                  SparsePair* out) {
  const std::uint64_t mask = (std::uint64_t{1} << l.chunk_bits) - 1;
  std::size_t i = 0;
  for (std::size_t c = 0; c < l.chunks && i < l.k; ++c) {
    const std::uint32_t count = (words[c / 2] >> (16 * (c % 2))) & 0xffffu;
    for (std::uint32_t q = 0; q < count && i < l.k; ++q, ++i) {
      const std::uint64_t bit = std::uint64_t{i} * l.chunk_bits;
      const std::size_t w = l.offset_word + static_cast<std::size_t>(bit / 32);
      const unsigned s = static_cast<unsigned>(bit % 32);
      std::uint64_t off = words[w] >> s;
      if (s + l.chunk_bits > 32) off |= std::uint64_t{words[w + 1]} << (32 - s);
      float v;
      if (l.values == WireValues::fp32) {
        v = pf::bits_float(words[l.value_word + i]);
      } else {
        const std::uint32_t h = (words[l.value_word + i / 2] >> (16 * (i % 2))) & 0xffffu;
        v = l.values == WireValues::bf16 ? pf::from_bf16(h) : pf::from_fp16(h);
      }
      out[i] = {
          static_cast<std::uint32_t>(base + ((std::uint64_t{c} << l.chunk_bits) | (off & mask))),
          v};
    }
  }
}

}  // namespace omgs::detail
