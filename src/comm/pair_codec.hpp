// Internal: the compact pair format (<omgs/pair_format.hpp>) on the host, one block at a
// time, for the sparse allreduce's host-side exchange (sparse_allreduce.cpp). The bytes are
// those of omgs::encode_pairs (tests/select/test_pair_codec.cpp compares them); these loops
// run on the progress thread, which must not launch Kokkos kernels beside the caller's.
#pragma once

#include <cstddef>
#include <cstdint>

#include <omgs/comm.hpp>
#include <omgs/export.hpp>
#include <omgs/pair_format.hpp>

namespace omgs::detail {

/// The compact pair format's value type of a pair wire (fp32 for pairs8 and fp32).
OMGS_EXPORT WireValues wire_values(PairWire wire);

/// v as it arrives in the wire's values (bf16 / fp16: rounded to nearest even, saturating;
/// fp32 and pairs8: v itself).
OMGS_EXPORT float round_to_wire(PairWire wire, float v);

/// Words of one block of `count` pairs in a range of n indices.
OMGS_EXPORT std::size_t block_words(std::uint64_t n, std::size_t count, WireValues values);
/// At least the words of `blocks` blocks holding `count` pairs in all, in ranges that
/// together hold n indices (bounded by their size with chunks of 2^15 entries, which the
/// chosen layout never exceeds).
OMGS_EXPORT std::size_t blocks_words_bound(std::uint64_t n, std::size_t count, std::size_t blocks);

/// Writes the block of pairs[0, count) (indices ascending in [base, base + layout.n)) into
/// words[0, layout.words); the values are rounded to the layout's type.
OMGS_EXPORT void encode_block(const PairLayout& layout, const SparsePair* pairs, std::uint64_t base,
                              std::uint32_t* words);

/// The block's layout.k pairs into out[0, layout.k), indices + base, ascending.
OMGS_EXPORT void decode_block(const PairLayout& layout, const std::uint32_t* words,
                              std::uint64_t base, SparsePair* out);

}  // namespace omgs::detail
