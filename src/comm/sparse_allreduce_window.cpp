// The sparse allreduce's step 1, receive side (sparse_allreduce_impl.hpp): a region's owner
// may receive up to P k pairs (every rank's pairs in one hot region), so it does not receive
// them all at once. It takes its peers' messages in rank order, in batches that fit its
// window (window_pairs(): about 2 k pairs), and folds each batch into the region's sums
// (sparse_allreduce::fold_by_index) before receiving the next: the region's memory is the
// window plus its distinct sums (at most n / P), whatever P is, and the sums are the rank-order
// sums of one reduce over everything (the same bits, whatever the window or the timing).
#include <algorithm>
#include <atomic>

#include "comm/sparse_allreduce_impl.hpp"

namespace omgs::detail {

namespace {

std::atomic<std::uint64_t> g_window_pairs{0};  // 0: the default

}  // namespace

std::uint64_t SparseAllreduce::window_pairs(std::uint64_t k) noexcept {
  const std::uint64_t set = g_window_pairs.load(std::memory_order_relaxed);
  return set != 0 ? set : std::max<std::uint64_t>(1, 2 * k);
}

void SparseAllreduce::set_window_pairs(std::uint64_t pairs) noexcept {
  g_window_pairs.store(pairs, std::memory_order_relaxed);
}

std::uint64_t SparseAllreduce::room_items(std::uint64_t n, std::uint64_t k, int ranks,
                                          PairWire wire) {
  const bool compact = wire != PairWire::pairs8;
  return Impl::Room(n, k, std::max(1, ranks), compact).items(compact);
}

void SparseAllreduce::Impl::begin_batch() {
  batch_first = next_rank;
  batch_used = 0;
  requests.clear();
  if (!compact())
    received.resize(window);  // the peers' pairs land here (no reallocation
  else
    recv_words.resize(window);  // while a receive is posted into it)
  phase = Phase::counts;
}

bool SparseAllreduce::Impl::fill_batch() {
  std::vector<int>& counts = compact() ? recv_wcounts : recv_counts;
  std::vector<int>& at = compact() ? recv_wdispls : recv_displs;
  if (at.size() != static_cast<std::size_t>(size)) at.assign(static_cast<std::size_t>(size), 0);
  while (next_rank < size) {
    const int r = next_rank;
    const auto s = static_cast<std::size_t>(r);
    // In rank order: the sums must not depend on which peer's message came first.
    if (!probe(r, kPairsTag, compact() ? MPI_UINT32_T : pair_type, counts)) return false;
    const auto units = static_cast<std::size_t>(r == rank ? send_counts[s] : counts[s]);
    if (batch_used > 0 && batch_used + units > window) break;  // the next batch's
    if (batch_used == 0 && units > window) {  // a message over the window, alone: room for it
      if (!compact())
        received.resize(units);
      else
        recv_words.resize(units);
    }
    at[s] = static_cast<int>(batch_used);
    if (r == rank && !compact()) {
      std::copy_n(binned.begin() + send_displs[s], send_counts[s], received.begin() + at[s]);
    } else if (r != rank) {
      if (compact())
        check(MPI_Imrecv(recv_words.data() + at[s], counts[s], MPI_UINT32_T, &messages[s],
                         next_request()),
              "MPI_Imrecv of a region's pairs");
      else
        check(
            MPI_Imrecv(received.data() + at[s], counts[s], pair_type, &messages[s], next_request()),
            "MPI_Imrecv of a region's pairs");
      stats.bytes_received += static_cast<std::uint64_t>(counts[s]) * (compact() ? 4 : 8);
    }
    batch_used += units;
    ++next_rank;
  }
  // The last batch completes this rank's sends too: its peers have all received theirs
  // before the histogram sums, which every peer's next exchange waits for.
  if (next_rank == size)
    requests.insert(requests.end(), send_requests.begin(), send_requests.end());
  phase = Phase::pairs;
  return true;
}

void SparseAllreduce::Impl::after_batch() {
  const std::size_t count = compact() ? decode_batch() : batch_used;
  const std::uint64_t before = reduced.size();
  sparse_allreduce::fold_by_index(received.data(), count, reduced, sort_keys, fold_scratch);
  ++stats.batches;
  stats.region_pairs += count;
  // The batch as received (and decoded), its sort keys, the sums before and after.
  const std::uint64_t held =
      (compact() ? 4 * batch_used : 0) + 8 * count + 8 * count + 8 * (before + reduced.size());
  stats.region_bytes = std::max(stats.region_bytes, held);
  if (next_rank < size) return begin_batch();
  post_first_histograms();
}

std::size_t SparseAllreduce::Impl::decode_batch() {
  const WireValues values = wire_values(wire);
  const std::uint64_t mine = region_size(rank);
  // The blocks' pair counts (their first word); a block's size follows from its count and
  // this region: a mismatch is a peer's bug.
  std::size_t total = 0;
  for (int r = batch_first; r < next_rank; ++r) {
    const auto s = static_cast<std::size_t>(r);
    if (r == rank) {
      total += static_cast<std::size_t>(send_counts[s]);
      continue;
    }
    recv_counts[s] = 0;
    if (recv_wcounts[s] == 0) continue;
    const std::uint32_t c = recv_words[static_cast<std::size_t>(recv_wdispls[s])];
    if (c == 0 || c > mine ||
        1 + block_words(mine, c, values) != static_cast<std::size_t>(recv_wcounts[s])) {
      phase = Phase::idle;
      throw Error("omgs: sparse allreduce: rank " + std::to_string(s) +
                  " sent a malformed block for this region");
    }
    recv_counts[s] = static_cast<int>(c);
    total += c;
  }
  received.resize(total);
  std::size_t at = 0;
  for (int r = batch_first; r < next_rank; ++r) {
    const auto s = static_cast<std::size_t>(r);
    if (r == rank) {  // this rank's own pairs do not travel, but are rounded as if they had
      for (int i = 0; i < send_counts[s]; ++i) {
        SparsePair p = binned[static_cast<std::size_t>(send_displs[s] + i)];
        p.value = round_to_wire(wire, p.value);
        received[at++] = p;
      }
    } else if (recv_counts[s] > 0) {
      const PairLayout l = make_pair_layout(mine, static_cast<std::size_t>(recv_counts[s]), values);
      decode_block(l, recv_words.data() + recv_wdispls[s] + 1,
                   bounds[static_cast<std::size_t>(rank)], received.data() + at);
      at += static_cast<std::size_t>(recv_counts[s]);
    }
  }
  return total;
}

}  // namespace omgs::detail
