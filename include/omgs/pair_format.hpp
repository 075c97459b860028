// The compact pair format: a rank's k selected (index, value) pairs of a group of n entries
// as one block of 32-bit words, about half the bytes of the 8-byte (index, value) pairs.
//
//   [ counts: C x u16 | values: k x (2 or 4 bytes) | offsets: k x b bits | pad to 8 bytes ]
//
// The group is cut into C = ceil(n / 2^b) chunks of 2^b entries; counts[c] is how many pairs
// fall in chunk c, the offsets are the pairs' indices within their chunk (b bits each, packed
// little-endian into the words), in ascending index order, and the values are in the same
// order (fp32, or bf16 / fp16 rounded to nearest even: detail/pair_format_values.hpp). Each
// section starts on a word. b (1 .. 15, so a count fits 16 bits) is the one that makes the
// block smallest for (n, k); every rank derives the same layout from (n, k, values).
// Decoding is parallel: a prefix sum over the counts gives each chunk's first pair,
// then one team per chunk adds its pairs (no serial pass over the group, no search).
//
// encode_pairs() zeroes the counts, then writes the block in one kernel over its words
// (values and offsets each written by one thread, the counts by atomic increments from the
// pairs: the bytes are the same on every backend) and, for 16-bit values, adds each
// pair's rounding error (value - sent value) into the residual: nothing is lost, the error
// is sent in a later iteration (error feedback). decode_pairs() adds blocks' pairs, scaled,
// into a vector. Indices are 32-bit: groups of more than 2^32 - 1 entries are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <omgs/detail/pair_format_kernels.hpp>
#include <omgs/error.hpp>

namespace omgs {

/// The type of the values on the wire.
enum class WireValues : std::uint8_t { fp32, bf16, fp16 };

inline std::string_view to_string(WireValues v) {
  switch (v) {
    case WireValues::fp32:
      return "fp32";
    case WireValues::bf16:
      return "bf16";
    case WireValues::fp16:
      return "fp16";
  }
  return "unknown";
}

/// "fp32" | "bf16" | "fp16"; throws omgs::Error naming the value otherwise.
inline WireValues parse_wire_values(std::string_view name) {
  for (WireValues v : {WireValues::fp32, WireValues::bf16, WireValues::fp16})
    if (name == to_string(v)) return v;
  throw Error("omgs: unknown wire value type '" + std::string(name) +
              "' (expected fp32, bf16 or fp16)");
}

inline std::size_t wire_value_bytes(WireValues v) {
  return v == WireValues::fp32 ? 4 : 2;
}

/// Where the sections of one block lie, in 32-bit words from its start.
struct PairLayout {
  WireValues values = WireValues::fp32;
  std::size_t n = 0, k = 0;
  unsigned chunk_bits = 0;                      ///< b: chunks of 2^b entries, offsets of b bits
  std::size_t chunks = 0;                       ///< C = ceil(n / 2^b)
  std::size_t value_word = 0, offset_word = 0;  ///< first word of each section
  std::size_t words = 0;                        ///< the block, an even number of words

  std::size_t bytes() const noexcept { return words * 4; }
  /// The block's bytes per pair (0 when k == 0: nothing is sent).
  double bytes_per_pair() const noexcept {
    return k == 0 ? 0.0 : static_cast<double>(bytes()) / static_cast<double>(k);
  }
};

/// The layout of k pairs of a group of n entries with chunks of 2^chunk_bits entries
/// (1 .. 15), or, with chunk_bits == 0, the chunk size that makes the block smallest.
/// k == 0 gives an empty block. Throws omgs::Error for k > n, n >= 2^32 or a bad chunk_bits.
inline PairLayout make_pair_layout(std::size_t n, std::size_t k, WireValues values,
                                   unsigned chunk_bits = 0) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw Error(
        "omgs: the compact pair format takes groups of at most 2^32 - 1 entries (32-bit "
        "indices); this group has " +
        std::to_string(n));
  if (k > n)
    throw Error("omgs: make_pair_layout: k = " + std::to_string(k) +
                " exceeds n = " + std::to_string(n));
  if (chunk_bits > 15)
    throw Error("omgs: make_pair_layout: chunk_bits = " + std::to_string(chunk_bits) +
                " is out of range (1 .. 15, or 0 for the smallest block)");
  const auto layout_for = [&](unsigned b) {
    PairLayout l;
    l.values = values;
    l.n = n;
    l.k = k;
    l.chunk_bits = b;
    if (k == 0) return l;
    l.chunks = (n + (std::size_t(1) << b) - 1) >> b;
    l.value_word = (l.chunks + 1) / 2;
    l.offset_word = l.value_word + (k * wire_value_bytes(values) + 3) / 4;
    const std::size_t end = l.offset_word + (k * b + 31) / 32;
    l.words = (end + 1) / 2 * 2;
    return l;
  };
  if (chunk_bits != 0) return layout_for(chunk_bits);
  PairLayout best = layout_for(15);
  for (unsigned b = 14; b >= 1; --b) {
    const PairLayout l = layout_for(b);
    if (l.words < best.words) best = l;
  }
  return best;
}

/// Writes the block of the k pairs (idx ascending, indices < n; val their values) into
/// words[0, layout.words). For bf16 / fp16, residual(idx[i]) += val[i] - sent value, unless
/// residual is empty (extent 0). With `failed`, the block is the failure marker instead
/// (its first word all ones, which no valid block has) and the residual is untouched.
/// Enqueued on exec (two launches); not fenced.
template <class Exec, class IndexView, class ValueView, class ResidView, class WordView>
void encode_pairs(const Exec& exec, const PairLayout& layout, const IndexView& idx,
                  const ValueView& val, const ResidView& residual, const WordView& words,
                  bool failed = false) {
  detail::pairs::encode(exec, layout, idx, val, residual, words, failed);
}

/// True when a block (its first word) is the failure marker.
KOKKOS_INLINE_FUNCTION bool is_failed_block(std::uint32_t first_word) {
  return first_word == detail::pairs::failed_marker;
}

/// out(index) += value * scale (atomically) for the pairs of `blocks` consecutive blocks of
/// this layout in words (block r at words[r * layout.words]). starts: scratch of at least
/// blocks * layout.chunks entries (the prefix sum of the counts). out is not zeroed first.
/// Enqueued on exec (two launches); not fenced.
template <class Exec, class WordView, class StartView, class OutView>
void decode_pairs(const Exec& exec, const PairLayout& layout, const WordView& words, int blocks,
                  const StartView& starts, const OutView& out, float scale = 1.0f) {
  detail::pairs::decode(exec, layout, words, blocks, starts, out, scale);
}

}  // namespace omgs
