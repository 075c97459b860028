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

/// One word of the block: what every section needs to build it, by value for the kernel.
template <class IndexView, class ValueView, class ResidView, class WordView>
struct EncodeWord {
  IndexView idx;
  ValueView val;
  ResidView resid;
  WordView words;
  std::size_t k, chunks, value_word, offset_word, used_words;
  unsigned b;
  double inv_b;  // 1.0 / b
  int code;
  bool failed, feedback;

  /// Counts pair i in its chunk's half of a count word. The count words are zeroed before
  /// this kernel; a count never reaches 2^16, so the halves never carry into each other.
  /// (Binary searches per chunk cost more on the host: each step waits for its load.)
  KOKKOS_INLINE_FUNCTION void count_pair(std::size_t i) const {
    const auto c = static_cast<std::size_t>(idx(i) >> b);
    Kokkos::atomic_add(&words(c / 2), std::uint32_t(1) << (16 * (c % 2)));
  }

  /// floor(x / b) without a 64-bit division per word (b is a run-time value): the double
  /// quotient, corrected by at most one either way.
  KOKKOS_INLINE_FUNCTION std::uint64_t div_b(std::uint64_t x) const {
    auto q = static_cast<std::uint64_t>(static_cast<double>(x) * inv_b);
    if (q * b > x) --q;
    if ((q + 1) * b <= x) ++q;
    return q;
  }

  KOKKOS_INLINE_FUNCTION std::uint32_t value_word_at(std::size_t w) const {
    if (code == 0) {
      count_pair(w);
      return float_bits(val(w));
    }
    std::uint32_t word = 0;
    for (std::size_t i = 2 * w; i < 2 * w + 2 && i < k; ++i) {
      count_pair(i);
      const float v = val(i);
      float sent = 0.0f;
      word |= encode_value(code, v, sent) << (16 * (i - 2 * w));
      if (feedback) resid(idx(i)) += v - sent;  // the rounding error stays in the residual
    }
    return word;
  }

  KOKKOS_INLINE_FUNCTION std::uint32_t offset_word_at(std::size_t w) const {
    const std::uint64_t lo = std::uint64_t(w) * 32, mask = (std::uint64_t(1) << b) - 1;
    const std::size_t first = static_cast<std::size_t>(div_b(lo));
    const std::size_t last = static_cast<std::size_t>(div_b(lo + 31));
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
      return;  // the counts: zeroed, then counted by the value words' threads
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
  if (!failed)
    fill_zero(exec, Kokkos::subview(words, std::make_pair(std::size_t(0), l.value_word)));
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
      1.0 / l.chunk_bits,
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

/// Pair i of the block at words[base]: returns its offset within its chunk, sets its value.
template <class WordView>
KOKKOS_INLINE_FUNCTION std::uint64_t read_pair(const WordView& words, std::size_t base,
                                               std::size_t value_word, std::size_t offset_word,
                                               unsigned b, int code, std::size_t i, float& v) {
  const std::uint64_t bit = std::uint64_t(i) * b;
  const std::size_t w = base + offset_word + static_cast<std::size_t>(bit / 32);
  const unsigned s = static_cast<unsigned>(bit % 32);
  std::uint64_t off = words(w) >> s;
  if (s + b > 32) off |= std::uint64_t(words(w + 1)) << (32 - s);
  if (code == 0) {
    v = bits_float(words(base + value_word + i));
  } else {
    const std::uint32_t word = words(base + value_word + i / 2);
    v = decode_value(code, (word >> (16 * (i % 2))) & 0xffffu);
  }
  return off & ((std::uint64_t(1) << b) - 1);
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
          float v;
          const std::uint64_t off = read_pair(words, base, value_word, offset_word, b, code, i, v);
          const std::size_t index = (c << b) | static_cast<std::size_t>(off);
          if (i < k && index < n) Kokkos::atomic_add(&out(index), v * scale);
        });
      });
}

/// starts(r * C + c): the position of chunk c's first pair among all blocks' pairs.
template <class Exec, class Layout, class WordView, class StartView>
void chunk_starts(const Exec& exec, const Layout& l, const WordView& words, int blocks,
                  const StartView& starts) {
  const std::size_t C = l.chunks, W = l.words;
  Kokkos::parallel_scan(
      OMGS_LABEL("omgs::pairs::chunk_starts"),
      range_policy(exec, 0, static_cast<std::int64_t>(C * static_cast<std::size_t>(blocks))),
      KOKKOS_LAMBDA(const std::int64_t i, std::size_t& sum, const bool final) {
        const auto j = static_cast<std::size_t>(i);
        if (final) starts(j) = sum;
        sum += count_at(words, (j / C) * W, j % C);
      });
}

/// Every block's pairs as (index, value) into pairs(r * k + i), one thread per (block,
/// chunk) and sequential writes; a pair outside the group (a corrupt block) becomes (0, 0).
/// The runtime then scatter-adds them like the 8-byte pairs: on the host this second pass
/// over P k pairs is several times faster than decode_chunks' one pass, whose atomic add
/// waits on the decoding of the same pair.
template <class Exec, class Layout, class WordView, class StartView, class PairsView>
void unpack(const Exec& exec, const Layout& l, const WordView& words, int blocks,
            const StartView& starts, const PairsView& pairs) {
  if (l.words == 0 || blocks <= 0) return;
  chunk_starts(exec, l, words, blocks, starts);
  using Pair = typename PairsView::non_const_value_type;
  const std::size_t C = l.chunks, W = l.words, k = l.k, n = l.n;
  const std::size_t value_word = l.value_word, offset_word = l.offset_word;
  const unsigned b = l.chunk_bits;
  const int code = static_cast<int>(l.values);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::pairs::unpack"),
      range_policy(exec, 0, static_cast<std::int64_t>(C * static_cast<std::size_t>(blocks))),
      KOKKOS_LAMBDA(const std::int64_t jj) {
        const auto j = static_cast<std::size_t>(jj);
        const std::size_t r = j / C, c = j % C, base = r * W;
        const std::size_t first = starts(j) - r * k;
        const std::uint32_t count = count_at(words, base, c);
        for (std::uint32_t q = 0; q < count && first + q < k; ++q) {
          const std::size_t i = first + q;
          float v;
          const std::uint64_t off = read_pair(words, base, value_word, offset_word, b, code, i, v);
          const std::size_t index = (c << b) | static_cast<std::size_t>(off);
          pairs(r * k + i) =
              index < n ? Pair{static_cast<std::uint32_t>(index), v} : Pair{0u, 0.0f};
        }
      });
}

template <class Exec, class Layout, class WordView, class StartView, class OutView>
void decode(const Exec& exec, const Layout& l, const WordView& words, int blocks,
            const StartView& starts, const OutView& out, float scale) {
  if (l.words == 0 || blocks <= 0) return;
  chunk_starts(exec, l, words, blocks, starts);
  decode_chunks(exec, l, words, blocks, starts, out, scale);
}

}  // namespace omgs::detail::pairs
