// The sparse allreduce's steps in the compact pair format (sparse_allreduce_impl.hpp): each
// peer gets one block over its region's range (step 1) and every rank's survivors travel as
// one block over its region (step 3). Values arrive rounded to the wire's type; what the
// rounding took away goes back through dropped() (returned_compact), so no mass is lost.
#include <algorithm>

#include "comm/sparse_allreduce_impl.hpp"

namespace omgs::detail {

namespace {

bool by_index(const SparsePair& a, const SparsePair& b) {
  return a.index < b.index;
}

/// Word counts and displacements of one block per rank r of count_of(r) pairs over a range
/// of range_of(r) indices, each after `header` words (no block where there are no pairs);
/// returns the total words.
template <class CountOf, class RangeOf>
int block_displs(std::size_t ranks, WireValues values, CountOf count_of, RangeOf range_of,
                 std::vector<int>& wcounts, std::vector<int>& wdispls, std::size_t header = 0) {
  wcounts.assign(ranks, 0);
  wdispls.assign(ranks, 0);
  std::size_t at = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    wdispls[r] = static_cast<int>(at);
    const auto c = static_cast<std::size_t>(count_of(r));
    wcounts[r] = c == 0 ? 0 : static_cast<int>(header + block_words(range_of(r), c, values));
    at += static_cast<std::size_t>(wcounts[r]);
    if (at > static_cast<std::size_t>(INT_MAX))
      throw Error("omgs: sparse allreduce: the compact blocks exceed 2^31-1 words");
  }
  return static_cast<int>(at);
}

}  // namespace

void SparseAllreduce::Impl::sort_segments() {
  std::size_t at = 0;
  for (const int c : send_counts) {
    const auto first = binned.begin() + static_cast<std::ptrdiff_t>(at);
    if (!std::is_sorted(first, first + c, by_index)) std::sort(first, first + c, by_index);
    at += static_cast<std::size_t>(c);
  }
}

void SparseAllreduce::Impl::post_compact_sends() {
  const WireValues values = wire_values(wire);
  const auto me = static_cast<std::size_t>(rank);
  const auto ranks = static_cast<std::size_t>(size);
  recv_wcounts.assign(ranks, 0);
  // To each other rank one message: its pair count, then one block over its region (empty
  // where there are no pairs).
  const int sent = block_displs(
      ranks, values, [&](std::size_t d) { return d == me ? 0 : send_counts[d]; },
      [this](std::size_t d) { return region_size(static_cast<int>(d)); }, send_wcounts,
      send_wdispls, 1);
  send_words.resize(static_cast<std::size_t>(sent));
  for (int i = 1; i < size; ++i) {  // the same rotation as the 8-byte pairs'
    const auto d = static_cast<std::size_t>((rank + i) % size);
    std::uint32_t* words = send_words.data() + send_wdispls[d];
    if (send_wcounts[d] > 0) {
      words[0] = static_cast<std::uint32_t>(send_counts[d]);
      const PairLayout l = make_pair_layout(region_size(static_cast<int>(d)),
                                            static_cast<std::size_t>(send_counts[d]), values);
      encode_block(l, binned.data() + send_displs[d], bounds[d], words + 1);
    }
    send_requests.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(words, send_wcounts[d], MPI_UINT32_T, static_cast<int>(d), tag_base + kPairsTag,
                    comm, &send_requests.back()),
          "MPI_Isend of a region's pairs");
    const auto block = static_cast<std::uint64_t>(std::max(0, send_wcounts[d] - 1));
    stats.bytes_sent += static_cast<std::uint64_t>(send_wcounts[d]) * 4;
    stats.pairs_sent += static_cast<std::uint64_t>(send_counts[d]);
    stats.pair_bytes_sent += block * 4;
  }
}

void SparseAllreduce::Impl::round_local() {
  rounded.clear();
  for (SparsePair& p : local) {
    const float sent = round_to_wire(wire, p.value);
    if (sent != p.value) rounded.push_back({p.index, p.value - sent});
    p.value = sent;  // what every rank decodes from this rank's block, this rank too
  }
}

void SparseAllreduce::Impl::post_compact_survivors() {
  const WireValues values = wire_values(wire);
  // One message to every peer: this region's survivor count, then their block (none where
  // there are none).
  const int block =
      local_count == 0 ? 0 : static_cast<int>(block_words(region_size(rank), local.size(), values));
  const int mine = block == 0 ? 0 : 1 + block;
  local_words.resize(static_cast<std::size_t>(mine));
  if (mine > 0) {
    local_words[0] = static_cast<std::uint32_t>(local_count);
    encode_block(make_pair_layout(region_size(rank), local.size(), values), local.data(),
                 bounds[static_cast<std::size_t>(rank)], local_words.data() + 1);
  }
  recv_wcounts.assign(static_cast<std::size_t>(size), 0);
  recv_wcounts[static_cast<std::size_t>(rank)] = mine;
  stats.bytes_sent += static_cast<std::uint64_t>(mine) * 4;  // once, as the allgather's payload
  stats.pairs_sent += static_cast<std::uint64_t>(local_count);
  stats.pair_bytes_sent += static_cast<std::uint64_t>(block) * 4;
  for (int i = 1; i < size; ++i)  // the same rotation as step 1's
    check(MPI_Isend(local_words.data(), mine, MPI_UINT32_T, (rank + i) % size,
                    tag_base + kSurvivorsTag, comm, next_request()),
          "MPI_Isend of the survivors");
}

void SparseAllreduce::Impl::post_compact_survivor_receives() {
  const int total = displs(recv_wcounts, recv_wdispls, "the survivors' blocks");
  const auto me = static_cast<std::size_t>(rank);
  gather_words.resize(static_cast<std::size_t>(total));
  std::copy(local_words.begin(), local_words.end(), gather_words.begin() + recv_wdispls[me]);
  stats.bytes_received += static_cast<std::uint64_t>(total - recv_wcounts[me]) * 4;
  for (int r = 0; r < size; ++r) {
    const auto s = static_cast<std::size_t>(r);
    if (r == rank) continue;
    check(MPI_Imrecv(gather_words.data() + recv_wdispls[s], recv_wcounts[s], MPI_UINT32_T,
                     &messages[s], next_request()),
          "MPI_Imrecv of the survivors");
  }
}

void SparseAllreduce::Impl::decode_survivors() {
  const WireValues values = wire_values(wire);
  for (std::size_t r = 0; r < recv_wcounts.size(); ++r) {
    recv_counts[r] = 0;
    if (recv_wcounts[r] == 0) continue;
    const std::uint64_t range = region_size(static_cast<int>(r));
    const std::uint32_t c = gather_words[static_cast<std::size_t>(recv_wdispls[r])];
    // A block's size follows from its count and its region: a mismatch is a peer's bug.
    if (c == 0 || c > range ||
        1 + block_words(range, c, values) != static_cast<std::size_t>(recv_wcounts[r])) {
      phase = Phase::idle;
      throw Error("omgs: sparse allreduce: rank " + std::to_string(r) +
                  " sent a malformed block of survivors");
    }
    recv_counts[r] = static_cast<int>(c);
  }
  const int total = displs(recv_counts, recv_displs, "the survivors");
  survivors.resize(static_cast<std::size_t>(total));
  for (std::size_t r = 0; r < recv_wcounts.size(); ++r) {
    if (recv_counts[r] == 0) continue;
    const PairLayout l = make_pair_layout(region_size(static_cast<int>(r)),
                                          static_cast<std::size_t>(recv_counts[r]), values);
    decode_block(l, gather_words.data() + recv_wdispls[r] + 1, bounds[r],
                 survivors.data() + recv_displs[r]);
  }
}

void SparseAllreduce::Impl::returned_compact() {
  // binned: this rank's pairs sorted by index (regions ascending, each sorted); rounded and
  // survivors sorted too: one merge, one entry per index (the runtime's add-back is not
  // atomic).
  dropped.clear();
  auto s = survivors.cbegin();
  auto e = rounded.cbegin();
  for (const SparsePair& p : binned) {
    for (; e != rounded.cend() && e->index < p.index; ++e) dropped.push_back(*e);
    s = std::lower_bound(s, survivors.cend(), p, by_index);
    const bool survived = s != survivors.cend() && s->index == p.index;
    float back = survived ? p.value - round_to_wire(wire, p.value) : p.value;
    if (e != rounded.cend() && e->index == p.index) back += (e++)->value;
    if (back != 0.0f) dropped.push_back({p.index, back});
  }
  for (; e != rounded.cend(); ++e) dropped.push_back(*e);
}

}  // namespace omgs::detail
