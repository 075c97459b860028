// Internal: the state of one SparseAllreduce (include/omgs/detail/sparse_allreduce.hpp) and
// its steps: the phases in sparse_allreduce.cpp, the compact pair format's parts
// (RuntimeOptions::pair_wire other than pairs8) in sparse_allreduce_compact.cpp.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/detail/sparse_allreduce_steps.hpp>
#include <omgs/error.hpp>

#include "comm/collectives.hpp"
#include "comm/pair_codec.hpp"
#include "comm/tagged_sum.hpp"

namespace omgs::detail {

struct SparseAllreduce::Impl {
  using Phase = SparseAllreduce::Phase;

  std::unique_ptr<OwnedComm> owned;  // the duplicate, unless the communicator is shared
  MPI_Comm comm = MPI_COMM_NULL;
  int tag_base = 0;
  MPI_Datatype pair_type = MPI_DATATYPE_NULL;
  std::uint64_t n = 0, k = 0;
  PairWire wire = PairWire::pairs8;
  int rank = 0, size = 1;
  Phase phase = Phase::idle;
  sparse_allreduce::IndexPermutation perm;  // the regions cut the permuted indices
  std::vector<std::uint64_t> bounds;
  // own: this rank's pairs as passed; permuted: with permuted indices, as every later step
  // holds them until finish() maps the survivors (and the compact dropped()) back.
  std::vector<SparsePair> own, permuted, binned, received, reduced, local, survivors, dropped;
  // Step 1's receive side, batch after batch (sparse_allreduce_window.cpp): `received` holds
  // the batch (its window), `reduced` the sums of the ranks before it, `fold_scratch` the
  // fold's output. Ranks [batch_first, next_rank) are in the batch, `batch_used` of the
  // window's units (pairs, or words with the compact format; this rank's own pairs count
  // as one unit each) taken.
  std::vector<SparsePair> fold_scratch;
  std::size_t window = 1, batch_used = 0;
  int batch_first = 0, next_rank = 0;
  // Step 1's sends, completed with the last batch: a region's owner receives its peers'
  // messages a batch at a time, so a batch must not wait for this rank's sends.
  std::vector<MPI_Request> send_requests;
  std::vector<int> send_counts, recv_counts, send_displs, recv_displs;
  std::vector<std::int64_t> coarse_hist, fine_hist;
  // The first histogram round: the coarse histogram, then (seeded) the fine histogram of the
  // coarse bin the last exchange picked, then the lowest rank whose input was bad (INT64_MAX:
  // none), in one sum; seed_bin -1: none yet. The same on every rank (it comes from the
  // globally summed histogram).
  std::vector<std::int64_t> first_round;
  std::int64_t seed_bin = -1;
  bool seeded = false;
  std::vector<std::uint64_t> sort_keys;  // reduce_by_index's scratch
  sparse_allreduce::CoarsePick pick;
  int local_count = 0;
  std::string local_error;  // this rank's bad input, reported by every rank after the first sum
  // Steps 1 and 3 send every peer one message (empty where this rank's input is bad or it has
  // nothing for the peer); the receiver probes each peer's (MPI_Improbe of the step's tag),
  // its size being the count, then receives it (MPI_Imrecv): no round of its own for the
  // counts. Each tag is tag_base + one of these.
  static constexpr int kPairsTag = 0, kHistTag = 1, kSurvivorsTag = 2;
  static_assert(kSurvivorsTag < SparseAllreduce::tags, "the tags an exchange uses");
  std::vector<char> probed;
  std::vector<MPI_Message> messages;
  std::vector<MPI_Request> requests;
  TaggedSum sum;  // the histogram rounds
  Stats stats;
  // The compact pair format: blocks in 32-bit words, their counts and displacements in
  // words per peer, and this region's survivors' rounding errors (index, sum - sent).
  std::vector<std::uint32_t> send_words, recv_words, local_words, gather_words;
  std::vector<int> send_wcounts, send_wdispls, recv_wcounts, recv_wdispls;
  std::vector<SparsePair> rounded;

  Impl(MPI_Comm c, bool shared, int tags_from, std::uint64_t n_, std::uint64_t k_, PairWire w)
      : owned(shared ? nullptr : std::make_unique<OwnedComm>(c, /*errors_return=*/true)),
        comm(shared ? c : owned->get()),
        tag_base(tags_from),
        n(n_),
        k(k_),
        wire(w),
        perm(n_) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }

  bool compact() const noexcept { return wire != PairWire::pairs8; }
  std::uint64_t region_size(int r) const {
    return bounds[static_cast<std::size_t>(r) + 1] - bounds[static_cast<std::size_t>(r)];
  }

  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw Error(std::string("omgs: sparse allreduce: ") + what +
                " failed: " + std::string(text, static_cast<std::size_t>(len)));
  }
  MPI_Request* next_request() {
    requests.push_back(MPI_REQUEST_NULL);
    return &requests.back();
  }
  static int displs(const std::vector<int>& counts, std::vector<int>& out, const char* what) {
    out.assign(counts.size(), 0);
    long long at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      out[r] = static_cast<int>(at);
      at += counts[r];
      if (counts[r] < 0 || at > INT_MAX)
        throw Error(std::string("omgs: sparse allreduce: ") + what +
                    " exceed 2^31-1 pairs or are negative");
    }
    return static_cast<int>(at);
  }

  /// Room for an exchange of uniform pairs, so that a warm exchange does not allocate (a
  /// progress thread's iteration must not), none of it growing as P k: a region receives
  /// about k pairs (the permutation spreads them), in a window of 2 k, and holds at most its
  /// n / P distinct sums; at most k + P - 1 survive in all (the threshold bin's ties cut,
  /// max_survivors()). More only where the pairs pile into one region (the vectors grow once,
  /// to at most the region's size). Elements of each vector's type; room_items() adds them
  /// up, so the footprint is what reserve() takes.
  struct Room {
    std::size_t k = 0, window = 1, sums = 0, survivors = 0, received = 0, keys = 0, dropped = 0;
    std::size_t send_words = 0, recv_words = 0, local_words = 0, gather_words = 0;
    Room(std::uint64_t n, std::uint64_t k_, int size, bool compact) {
      k = static_cast<std::size_t>(k_);
      window = static_cast<std::size_t>(SparseAllreduce::window_pairs(k_));
      const auto region = static_cast<std::size_t>(n / static_cast<std::uint64_t>(size) + 1);
      sums = std::min(region, 2 * window);
      survivors = static_cast<std::size_t>(
          sparse_allreduce::max_survivors(n, k_, static_cast<std::uint64_t>(size)));
      // The window (decoded compact blocks take at most two pairs a word), and the scratch of
      // finish()'s sort of dropped() (compact: k + sums) and of the survivors.
      received = std::max({compact ? 2 * window : window, k + sums, survivors});
      keys = compact ? 2 * window : window;
      dropped = k + (compact ? sums : 0);  // with compact: its region's rounding errors too
      if (!compact) return;
      const auto ranks = static_cast<std::size_t>(size);
      // Step 1's blocks each start with their pair count (one word); the window holds a batch.
      send_words = blocks_words_bound(n, k, ranks) + ranks;
      recv_words = window;
      // Step 3's blocks each start with their survivor count too.
      local_words = blocks_words_bound(n, sums, 1) + 1;
      gather_words = blocks_words_bound(n, survivors, ranks) + ranks;
    }
    /// In 8-byte items (pairs and keys; words two to an item).
    std::uint64_t items(bool compact) const {
      const std::uint64_t words = send_words + recv_words + local_words + gather_words;
      return 3 * std::uint64_t{k} + received + (compact ? 4 : 3) * std::uint64_t{sums} + survivors +
             dropped + keys + (words + 1) / 2;
    }
  };
  void reserve() {
    const Room room(n, k, size, compact());
    window = room.window;
    for (auto* v : {&reduced, &fold_scratch, &local}) v->reserve(room.sums);
    survivors.reserve(room.survivors);
    received.reserve(room.received);
    for (auto* v : {&own, &permuted, &binned}) v->reserve(room.k);
    dropped.reserve(room.dropped);
    sort_keys.reserve(room.keys);
    requests.reserve(2 * static_cast<std::size_t>(size) + 1);
    send_requests.reserve(static_cast<std::size_t>(size));
    probed.reserve(static_cast<std::size_t>(size));
    messages.reserve(static_cast<std::size_t>(size));
    for (auto* v : {&send_counts, &recv_counts, &send_displs, &recv_displs, &send_wcounts,
                    &send_wdispls, &recv_wcounts, &recv_wdispls})
      v->reserve(static_cast<std::size_t>(size));
    coarse_hist.reserve(sparse_allreduce::hist_bins);
    fine_hist.reserve(sparse_allreduce::hist_bins);
    first_round.reserve(2 * sparse_allreduce::hist_bins + 1);
    sum.reserve(2 * sparse_allreduce::hist_bins + 1);
    if (!compact()) return;
    rounded.reserve(room.sums);
    send_words.reserve(room.send_words);
    recv_words.reserve(room.recv_words);
    local_words.reserve(room.local_words);
    gather_words.reserve(room.gather_words);
  }
  void post_sends();  // step 1: bin this rank's pairs, send every peer its region's
  /// Every peer's message of tag_base + tag probed, its size (in `type`) into counts; false
  /// while one is missing.
  bool probe_all(int tag, MPI_Datatype type, std::vector<int>& counts);
  bool probe(int r, int tag, MPI_Datatype type, std::vector<int>& counts);  // rank r's only
  // Step 1's receive side (sparse_allreduce_window.cpp).
  void begin_batch();          // an empty window from rank next_rank on (phase counts)
  bool fill_batch();           // probes and receives ranks' messages in order while they fit; true
                               // once the batch is closed (phase pairs)
  void after_batch();          // the batch folded into the region's sums; the next, or step 2
  std::size_t decode_batch();  // compact: the batch's blocks (and own pairs) into `received`
  void post_first_histograms();  // coarse, with the seeded fine one and the error slot
  void post_histogram(bool fine);
  void after_first_histograms();  // every rank's error reported, or the threshold, or the fine
                                  // histogram of another bin
  void post_survivor_sends(const sparse_allreduce::Cut& cut);  // this region's survivors to
                                                               // every peer
  void post_survivor_receives();                               // step 3's probed messages
  void unpermute(std::vector<SparsePair>& pairs);              // back to indices, sorted by index
  void finish();
  void advance();  // the requests of `phase` are complete: post the next step

  // The compact pair format (sparse_allreduce_compact.cpp).
  void sort_segments();           // each region's pairs by index (the blocks need it)
  void post_compact_sends();      // the regions' blocks (a count word first), point to point
  void round_local();             // this region's survivors as sent; errors into `rounded`
  void post_compact_survivors();  // this region's block (a count word first) to every peer
  void post_compact_survivor_receives();  // the probed blocks' receives
  void decode_survivors();                // every region's block into `survivors`
  void returned_compact();                // dropped(): what this rank's residual takes back
};

}  // namespace omgs::detail
