// Internal: the kernels of the compact pair format (pair_format.hpp documents the block).
// Templates on the layout type so that pair_format.hpp can define it after including this.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/pair_format_values.hpp>

namespace omgs::detail::pairs {

constexpr std::uint32_t failed_marker = 0xFFFFFFFFu;

/// Value codes as in omgs::WireValues: 0 fp32, 1 bf16, 2 fp16.
KOKKOS_INLINE_FUNCTION std::uint32_t encode_value(int code, float v, float& sent) {
  if (code == 1) {
    const std::uint16_t h = to_bf16(v);
    sent = from_bf16(h);
    return h;
  }
  const std::uint16_t h = to_fp16(v);
  sent = from_fp16(h);
  return h;
}

KOKKOS_INLINE_FUNCTION float decode_value(int code, std::uint32_t h) {
  return code == 1 ? from_bf16(h) : from_fp16(h);
}

/// First position in the ascending idx[0, k) whose index is >= key (key may be 2^32).
/// Branch-free halving (the compiler emits conditional moves): a chunk's count takes two of
/// these, and mispredicted branches made them the encoder's main cost on the host.
template <class IndexView>
KOKKOS_INLINE_FUNCTION std::size_t lower_bound(const IndexView& idx, std::size_t k,
                                               std::uint64_t key) {
  if (k == 0 || key > 0xffffffffu) return k;
  std::size_t lo = 0, len = k;
  while (len > 1) {
    const std::size_t half = len / 2;
    lo = static_cast<std::uint64_t>(idx(lo + half - 1)) < key ? lo + half : lo;
    len -= half;
  }
  return lo + (static_cast<std::uint64_t>(idx(lo)) < key ? 1 : 0);
}

/// One word of the block: what every section needs to build it, by value for the kernel.
template <class IndexView, class ValueView, class ResidView, class WordView>
struct EncodeWord {
  IndexView idx;
  ValueView val;
  ResidView resid;
  WordView words;
  std::size_t k, chunks, value_word, offset_word, used_words;
  unsigned b;
  int code;
  bool failed, feedback;

  KOKKOS_INLINE_FUNCTION std::uint32_t count_of(std::size_t c) const {
    if (c >= chunks) return 0;
    return static_cast<std::uint32_t>(lower_bound(idx, k, std::uint64_t(c + 1) << b) -
                                      lower_bound(idx, k, std::uint64_t(c) << b));
  }

  KOKKOS_INLINE_FUNCTION std::uint32_t value_word_at(std::size_t w) const {
    if (code == 0) return float_bits(val(w));
    std::uint32_t word = 0;
    for (std::size_t i = 2 * w; i < 2 * w + 2 && i < k; ++i) {
      const float v = val(i);
      float sent = 0.0f;
      word |= encode_value(code, v, sent) << (16 * (i - 2 * w));
      if (feedback) resid(idx(i)) += v - sent;  // the rounding error stays in the residual
    }
    return word;
  }

  KOKKOS_INLINE_FUNCTION std::uint32_t offset_word_at(std::size_t w) const {
    const std::uint64_t lo = std::uint64_t(w) * 32, mask = (std::uint64_t(1) << b) - 1;
    const std::size_t first = static_cast<std::size_t>(lo / b);
    const std::size_t last = static_cast<std::size_t>((lo + 31) / b);
    std::uint64_t word = 0;
    for (std::size_t i = first; i <= last && i < k; ++i) {
      const std::uint64_t off = idx(i) & mask;
      const std::int64_t at =
          static_cast<std::int64_t>(std::uint64_t(i) * b) - static_cast<std::int64_t>(lo);
      word |= at < 0 ? off >> (-at) : off << at;
    }
    return static_cast<std::uint32_t>(word);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const auto w = static_cast<std::size_t>(i);
    std::uint32_t word = 0;
    if (failed)
      word = w == 0 ? failed_marker : 0u;
    else if (w < value_word)
      word = count_of(2 * w) | (count_of(2 * w + 1) << 16);
    else if (w < offset_word)
      word = value_word_at(w - value_word);
    else if (w < used_words)
      word = offset_word_at(w - offset_word);
    words(w) = word;
  }
};

template <class Exec, class Layout, class IndexView, class ValueView, class ResidView,
          class WordView>
void encode(const Exec& exec, const Layout& l, const IndexView& idx, const ValueView& val,
            const ResidView& resid, const WordView& words, bool failed) {
  if (l.words == 0) return;
  const int code = static_cast<int>(l.values);
  EncodeWord<IndexView, ValueView, ResidView, WordView> f{
      idx,
      val,
      resid,
      words,
      l.k,
      l.chunks,
      l.value_word,
      l.offset_word,
      l.offset_word + (l.k * l.chunk_bits + 31) / 32,
      l.chunk_bits,
      code,
      failed,
      code != 0 && resid.extent(0) != 0};
  Kokkos::parallel_for(OMGS_LABEL("omgs::pairs::encode"),
                       range_policy(exec, 0, static_cast<std::int64_t>(l.words)), f);
}

/// The count of chunk c of the block at words[base].
template <class WordView>
KOKKOS_INLINE_FUNCTION std::uint32_t count_at(const WordView& words, std::size_t base,
                                              std::size_t c) {
  return (words(base + c / 2) >> (16 * (c % 2))) & 0xffffu;
}

/// One team per (block, chunk): its pairs follow from the chunk's start, no search. Host
/// teams have one thread; a device team is a warp's worth of threads over the chunk's pairs.
template <class Exec, class Layout, class WordView, class StartView, class OutView>
void decode_chunks(const Exec& exec, const Layout& l, const WordView& words, int blocks,
                   const StartView& starts, const OutView& out, float scale) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const std::size_t C = l.chunks, W = l.words, k = l.k, n = l.n;
  const std::size_t value_word = l.value_word, offset_word = l.offset_word;
  const unsigned b = l.chunk_bits;
  const int code = static_cast<int>(l.values);
  constexpr bool host =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;
  const Policy policy(exec, static_cast<int>(C * static_cast<std::size_t>(blocks)), host ? 1 : 32);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::pairs::decode"), policy,
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const auto j = static_cast<std::size_t>(team.league_rank());
        const std::size_t r = j / C, c = j % C, base = r * W;
        const std::size_t first = starts(j) - r * k;
        const std::uint32_t count = count_at(words, base, c);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](const std::uint32_t q) {
          const std::size_t i = first + q;
          const std::uint64_t bit = std::uint64_t(i) * b;
          const std::size_t w = base + offset_word + static_cast<std::size_t>(bit / 32);
          const unsigned s = static_cast<unsigned>(bit % 32);
          std::uint64_t off = words(w) >> s;
          if (s + b > 32) off |= std::uint64_t(words(w + 1)) << (32 - s);
          off &= (std::uint64_t(1) << b) - 1;
          float v;
          if (code == 0) {
            v = bits_float(words(base + value_word + i));
          } else {
            const std::uint32_t word = words(base + value_word + i / 2);
            v = decode_value(code, (word >> (16 * (i % 2))) & 0xffffu);
          }
          const std::size_t index = (c << b) | static_cast<std::size_t>(off);
          if (i < k && index < n) Kokkos::atomic_add(&out(index), v * scale);
        });
      });
}

template <class Exec, class Layout, class WordView, class StartView, class OutView>
void decode(const Exec& exec, const Layout& l, const WordView& words, int blocks,
            const StartView& starts, const OutView& out, float scale) {
  if (l.words == 0 || blocks <= 0) return;
  const std::size_t C = l.chunks, W = l.words;
  // starts(r * C + c): the position of chunk c's first pair among all blocks' pairs.
  Kokkos::parallel_scan(
      OMGS_LABEL("omgs::pairs::chunk_starts"),
      range_policy(exec, 0, static_cast<std::int64_t>(C * static_cast<std::size_t>(blocks))),
      KOKKOS_LAMBDA(const std::int64_t i, std::size_t& sum, const bool final) {
        const auto j = static_cast<std::size_t>(i);
        if (final) starts(j) = sum;
        sum += count_at(words, (j / C) * W, j % C);
      });
  decode_chunks(exec, l, words, blocks, starts, out, scale);
}

}  // namespace omgs::detail::pairs
