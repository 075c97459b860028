// A sparse allreduce of one group's selected (index, value) pairs, in the style of Ok-Topk
// (Li and Hoefler, PPoPP 2022), whose volume per rank stays near O(k) where an allgather of
// every rank's k pairs receives (P - 1) k:
//
//   1. split and reduce: the group's indices, permuted by a fixed pseudo-random bijection
//      (sparse_allreduce::IndexPermutation, as Zen hashes them), are cut into P even
//      regions, one per rank: the few hot index ranges real gradients have (an embedding's
//      frequent rows, an output layer) spread over every region instead of loading one rank;
//      each rank sends the pairs it selected in region j to rank j, point to point, one
//      message to every peer (empty where it has none; each rank starting at its right-hand
//      neighbour so that no rank is hit by all at once); the receiver probes each peer's
//      message for its size (MPI_Improbe, then MPI_Imrecv), so the counts take no round of
//      their own; and each rank sums what it receives for its region, in rank order, in
//      batches of peers whose messages fit a window of about 2 k pairs (window_pairs()), each
//      folded into the region's sums before the next is received: its memory is the window
//      and the region's distinct entries (at most n / P), not the P k pairs it may receive;
//   2. global selection: small histogram sums over the ranks find the magnitude above which about k
//      of all reduced entries lie (exact to 2^-11 of the k-th magnitude): a coarse one
//      finds the bin of the k-th largest and a fine one that bin's entries, of which each
//      region keeps its share of those still wanted (k + P - 1 survivors at most); the fine
//      histogram of the bin the last exchange picked travels with the coarse one, so where
//      the k-th largest stayed in that bin (a threshold that drifts slowly, as training's
//      does) one round does, and a second (the fine histogram of the new bin) otherwise;
//   3. each rank sends its region's survivors to every peer, whose probe of the message
//      gives their count, and maps every region's back to their indices, so every rank holds
//      the same sums.
//
// Every step is point-to-point (the histogram sums too: recursive doubling, comm/tagged_sum.hpp),
// each kind of message on a tag of its own, so that the exchanges of several groups can share one
// communicator, each with its own tags (SharedComm), advanced in any order: collectives would
// have to be posted in the same order on every rank.
//
// The result is the global top-k of the summed pairs, not the sum of every rank's top-k: a
// rank's pair whose index did not survive is returned by dropped(), for its residual, so no
// gradient mass is lost. With a compact PairWire (fp32, bf16, fp16), steps 1 and 3 send each
// peer one block of the compact pair format (<omgs/pair_format.hpp>) over its region's range
// instead of 8-byte pairs: every pair's value is rounded to the wire's type before the
// reduction (the owner's own pairs too, so the sums do not depend on who owns a region), the
// owner rounds its survivors' sums, and dropped() carries both rounding errors back. Every step is
// non-blocking: test() advances the exchange and never waits, so a progress thread can drive it
// beside other collectives. One exchange at a time per object; its MPI calls use a duplicate of the
// communicator of its own, or a communicator shared with other exchanges (SharedComm).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/export.hpp>

namespace omgs::detail {

class OMGS_EXPORT SparseAllreduce {
 public:
  /// Bytes this rank sent and received in the last exchange (payload only: pairs, counts,
  /// histograms), and how many entries survived in all; the pairs this rank sent (to the
  /// regions' owners, and its region's survivors, counted once) and their bytes; the pairs
  /// every rank (this one included) selected in this rank's region, which it received and
  /// reduced (the busiest rank's against the mean over ranks says how balanced the regions are).
  struct Stats {
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    std::uint64_t survivors = 0;
    std::uint64_t pairs_sent = 0, pair_bytes_sent = 0;
    std::uint64_t region_pairs = 0;
    /// The most bytes this rank held at once to reduce its region (step 1's receive side):
    /// the batch of peers' messages in its window (as received, and decoded with the compact
    /// format), the fold's sort keys, the region's sums before and after the fold. Bounded by
    /// the window and the region's distinct entries, whatever the number of ranks; and how
    /// many batches the region's messages took (1 where they fit the window together).
    std::uint64_t region_bytes = 0;
    std::uint32_t batches = 0;
    /// Dependent rounds (point-to-point steps, each waiting for the last; a histogram sum
    /// counts as one): 4, or 3 where the seeded fine histogram held the threshold (or every
    /// entry survives).
    std::uint32_t rounds = 0;
  };
  enum class Phase : std::uint8_t {
    idle,
    counts,  // step 1's pairs sent; every peer's message probed for its size
    pairs,
    coarse,
    fine,
    gather_counts,  // the survivors sent; every peer's message probed for its size
    gather,
    done
  };

  /// Tags an exchange uses on its communicator (from its tag base): the regions' pairs, the
  /// histogram sums, the survivors.
  static constexpr int tags = 3;
  /// A communicator that several exchanges share (no duplicate): this one's messages carry
  /// the tags tag_base .. tag_base + tags - 1, which nothing else on comm may use.
  struct SharedComm {
    MPI_Comm comm = MPI_COMM_NULL;
    int tag_base = 0;
  };

  /// Collective over comm (duplicates it): a group of `n` elements of which about `k` in all
  /// survive each exchange, its pairs travelling as `wire` says. Throws omgs::Error on every
  /// rank if the ranks disagree on n, k or wire, or if n exceeds 2^32 (indices are 32-bit;
  /// 2^32 - 1 with the compact pair format).
  SparseAllreduce(MPI_Comm comm, std::uint64_t n, std::uint64_t k,
                  PairWire wire = PairWire::pairs8);
  /// The same on a shared communicator (collective over shared.comm, in the same order on
  /// every rank as the other exchanges made on it). Throws omgs::Error on every rank, before
  /// any collective, if the tags pass the communicator's MPI_TAG_UB or tag_base is negative.
  SparseAllreduce(SharedComm shared, std::uint64_t n, std::uint64_t k,
                  PairWire wire = PairWire::pairs8);
  ~SparseAllreduce();
  SparseAllreduce(const SparseAllreduce&) = delete;
  SparseAllreduce& operator=(const SparseAllreduce&) = delete;

  /// Starts an exchange of this rank's `count` pairs (indices below n, distinct, any order;
  /// copied). Throws omgs::Error if one is in flight. A pair outside the group makes every
  /// rank's test() throw omgs::Error (this rank's names the pair), with no pair exchanged.
  void start(const SparsePair* pairs, std::size_t count);
  /// Advances the exchange without blocking; true once it is complete. Throws omgs::Error
  /// naming the step on an MPI error.
  bool test();
  /// test() until complete, for at most timeout_s; false past it (phase() says where).
  bool wait(double timeout_s);

  /// After completion: the surviving entries of every region, sorted by index, each the sum
  /// over ranks; identical on every rank; at most sparse_allreduce::max_survivors(n, k, P)
  /// (k + P - 1), however many sums tie at the threshold.
  const std::vector<SparsePair>& survivors() const noexcept;
  /// After completion: what this rank's residual takes back. With PairWire::pairs8, its
  /// pairs whose index did not survive. With the compact format, sorted by index and
  /// distinct: per index, the pair's value if it did not survive, else what the wire rounded
  /// away (value - sent, nonzero only for bf16 / fp16), plus, for the survivors of this
  /// rank's region, sum - sent (bf16 / fp16); entries that would be 0 are left out. Every
  /// rank's dropped() and the survivors together hold exactly the pairs' mass.
  const std::vector<SparsePair>& dropped() const noexcept;
  /// The regions: region r holds the indices i with bounds[r] <= IndexPermutation(n)
  /// .forward(i) < bounds[r + 1] (even bounds, the same for every exchange).
  const std::vector<std::uint64_t>& bounds() const noexcept;
  const Stats& stats() const noexcept;
  Phase phase() const noexcept;
  static const char* to_string(Phase p) noexcept;

  /// The pairs of peers' messages a region's owner receives and folds at once (its window;
  /// a single larger message is received alone): 2 k (at least 1), or what
  /// set_window_pairs() set when the exchange was made.
  static std::uint64_t window_pairs(std::uint64_t k) noexcept;
  /// The 8-byte items (pairs, sort keys; 32-bit words two to an item) an exchange of a
  /// group of n elements, k selected, on `ranks` ranks reserves at set-up (its buffers; the
  /// O(P) requests and counts left out): 24 k + P - 1 with 8-byte pairs where n / P >= 4 k
  /// and P <= 4 k + 1 (the k + P - 1 survivors of sparse_allreduce::max_survivors among
  /// them), less where the regions are smaller: O(k + P), never P k. The runtime's footprint of a
  /// sparse-allreduce group adds it to its own buffers.
  static std::uint64_t room_items(std::uint64_t n, std::uint64_t k, int ranks, PairWire wire);
  /// For tests: a smaller window makes a region's messages arrive in several batches on few
  /// ranks. 0 restores the default. Read when an exchange is made.
  static void set_window_pairs(std::uint64_t pairs) noexcept;

  struct Impl;

 private:
  void agree(std::uint64_t n, std::uint64_t k, PairWire wire);  // the ranks' group, checked
  std::unique_ptr<Impl> impl_;
};

}  // namespace omgs::detail
