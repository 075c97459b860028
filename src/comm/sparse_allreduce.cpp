// The sparse allreduce's non-blocking exchange (include/omgs/detail/sparse_allreduce.hpp).
#include <chrono>
#include <thread>

#include "comm/sparse_allreduce_impl.hpp"

namespace omgs::detail {

namespace sa = sparse_allreduce;
using Phase = SparseAllreduce::Phase;

void SparseAllreduce::Impl::post_sends() {
  local_error.clear();
  permuted.resize(own.size());
  for (std::size_t i = 0; i < own.size(); ++i)  // an index >= n stays, for bin_by_region's error
    permuted[i] = {static_cast<std::uint32_t>(perm.forward(own[i].index)), own[i].value};
  try {
    sa::bin_by_region(permuted.data(), permuted.size(), bounds, binned, send_counts);
  } catch (const Error& e) {
    local_error = e.what();
    binned.clear();
    send_counts.assign(static_cast<std::size_t>(size), 0);
  }
  displs(send_counts, send_displs, "this rank's pairs");
  stats = {};
  stats.rounds = 1;
  send_requests.clear();
  const auto me = static_cast<std::size_t>(rank);
  probed.assign(static_cast<std::size_t>(size), 0);
  probed[me] = 1;
  messages.assign(static_cast<std::size_t>(size), MPI_MESSAGE_NULL);
  recv_counts.assign(static_cast<std::size_t>(size), 0);
  recv_counts[me] = send_counts[me];
  if (compact()) {
    if (local_error.empty()) sort_segments();
    post_compact_sends();
  } else {
    // Rank r sends to r + 1 first, then r + 2, ...: at each step every rank has one peer.
    // Every peer gets a message, empty where it has no pairs: its size is the count.
    for (int i = 1; i < size; ++i) {
      const auto d = static_cast<std::size_t>((rank + i) % size);
      send_requests.push_back(MPI_REQUEST_NULL);
      check(MPI_Isend(binned.data() + send_displs[d], send_counts[d], pair_type,
                      static_cast<int>(d), tag_base + kPairsTag, comm, &send_requests.back()),
            "MPI_Isend of a region's pairs");
      stats.bytes_sent += static_cast<std::uint64_t>(send_counts[d]) * sizeof(SparsePair);
      stats.pairs_sent += static_cast<std::uint64_t>(send_counts[d]);
      stats.pair_bytes_sent += static_cast<std::uint64_t>(send_counts[d]) * sizeof(SparsePair);
    }
  }
  next_rank = 0;
  reduced.clear();
  begin_batch();
}

bool SparseAllreduce::Impl::probe(int r, int tag, MPI_Datatype type, std::vector<int>& counts) {
  const auto s = static_cast<std::size_t>(r);
  if (probed[s]) return true;
  int flag = 0;
  MPI_Status st;
  // The peer's one message of this step: its earlier ones of this tag were taken by earlier
  // exchanges (MPI does not let messages of one source and tag overtake each other), and
  // its next exchange's cannot be sent before this rank has taken part in this one's sums.
  check(MPI_Improbe(r, tag_base + tag, comm, &flag, &messages[s], &st), "MPI_Improbe");
  if (!flag) return false;
  probed[s] = 1;
  int count = 0;
  check(MPI_Get_count(&st, type, &count), "MPI_Get_count");
  counts[s] = count;
  return true;
}

bool SparseAllreduce::Impl::probe_all(int tag, MPI_Datatype type, std::vector<int>& counts) {
  int missing = 0;
  for (int r = 0; r < size; ++r) missing += probe(r, tag, type, counts) ? 0 : 1;
  return missing == 0;
}

void SparseAllreduce::Impl::post_first_histograms() {
  sa::histogram(reduced, false, 0, coarse_hist);
  first_round.assign(coarse_hist.begin(), coarse_hist.end());
  seeded = seed_bin >= 0;
  if (seeded) {
    sa::histogram(reduced, true, static_cast<std::uint32_t>(seed_bin), fine_hist);
    first_round.insert(first_round.end(), fine_hist.begin(), fine_hist.end());
  }
  // A bad input is named after this sum, when every rank has sent its (empty) messages.
  first_round.push_back(local_error.empty() ? INT64_MAX : rank);
  const auto bytes = static_cast<std::uint64_t>(first_round.size()) * sizeof(std::int64_t);
  stats.bytes_sent += bytes;
  stats.bytes_received += bytes;
  ++stats.rounds;
  check(sum.start(comm, tag_base + kHistTag, first_round.data(),
                  static_cast<int>(first_round.size()), 1),
        "the sum of the coarse histogram");
  phase = Phase::coarse;
}

void SparseAllreduce::Impl::after_first_histograms() {
  const std::int64_t error_from = first_round.back();
  first_round.pop_back();
  if (error_from != INT64_MAX) {  // the same on every rank: no pair is used
    phase = Phase::idle;
    throw Error(!local_error.empty()
                    ? local_error
                    : "omgs: sparse allreduce: rank " + std::to_string(error_from) +
                          " passed a pair outside the group (see its error)");
  }
  const auto bins = static_cast<std::ptrdiff_t>(sa::hist_bins);
  coarse_hist.assign(first_round.begin(), first_round.begin() + bins);
  pick = sa::pick_coarse(coarse_hist, k);
  if (pick.keep_all || pick.keep_none)  // the same on every rank: the histogram is global
    return post_survivor_sends(sa::cut_of(pick, fine_hist));
  const bool hit = seeded && static_cast<std::int64_t>(pick.bin) == seed_bin;
  seed_bin = pick.bin;
  if (!hit) return post_histogram(true);
  // The k-th largest is in the bin the last exchange picked: its fine histogram came along,
  // the same one a second round would sum.
  fine_hist.assign(first_round.begin() + bins, first_round.end());
  post_survivor_sends(sa::cut_of(pick, fine_hist));
}

void SparseAllreduce::Impl::post_histogram(bool fine) {
  std::vector<std::int64_t>& hist = fine ? fine_hist : coarse_hist;
  sa::histogram(reduced, fine, pick.bin, hist);
  const auto bytes = static_cast<std::uint64_t>(hist.size()) * sizeof(std::int64_t);
  stats.bytes_sent += bytes;
  stats.bytes_received += bytes;
  ++stats.rounds;
  check(sum.start(comm, tag_base + kHistTag, hist.data(), static_cast<int>(hist.size()), 0),
        fine ? "the sum of the fine histogram" : "the sum of the coarse histogram");
  phase = fine ? Phase::fine : Phase::coarse;
}

void SparseAllreduce::Impl::post_survivor_sends(const sparse_allreduce::Cut& cut) {
  // This region's share of the threshold bin's ties: the survivors of all regions number at
  // most k + P - 1 (max_survivors), so the buffers that receive them do not grow as P k.
  // The owner alone decides for its region; the others receive its choice.
  sa::select_cut(reduced, cut, local, fold_scratch);
  if (compact()) round_local();
  local_count = static_cast<int>(local.size());
  ++stats.rounds;
  const auto me = static_cast<std::size_t>(rank);
  probed.assign(static_cast<std::size_t>(size), 0);
  probed[me] = 1;
  messages.assign(static_cast<std::size_t>(size), MPI_MESSAGE_NULL);
  recv_counts.assign(static_cast<std::size_t>(size), 0);
  recv_counts[me] = local_count;
  if (compact()) {
    post_compact_survivors();
  } else {
    // As the allgather's payload: this region's survivors counted once.
    stats.bytes_sent += static_cast<std::uint64_t>(local_count) * sizeof(SparsePair);
    stats.pairs_sent += static_cast<std::uint64_t>(local_count);
    stats.pair_bytes_sent += static_cast<std::uint64_t>(local_count) * sizeof(SparsePair);
    for (int i = 1; i < size; ++i)  // the same rotation as step 1's
      check(MPI_Isend(local.data(), local_count, pair_type, (rank + i) % size,
                      tag_base + kSurvivorsTag, comm, next_request()),
            "MPI_Isend of the survivors");
  }
  phase = Phase::gather_counts;
}

void SparseAllreduce::Impl::post_survivor_receives() {
  if (compact()) {
    post_compact_survivor_receives();
  } else {
    const int total = displs(recv_counts, recv_displs, "the survivors");
    survivors.resize(static_cast<std::size_t>(total));
    std::copy(local.begin(), local.end(),
              survivors.begin() + recv_displs[static_cast<std::size_t>(rank)]);
    stats.bytes_received += static_cast<std::uint64_t>(total - local_count) * sizeof(SparsePair);
    for (int r = 0; r < size; ++r) {
      const auto s = static_cast<std::size_t>(r);
      if (r == rank) continue;
      check(MPI_Imrecv(survivors.data() + recv_displs[s], recv_counts[s], pair_type, &messages[s],
                       next_request()),
            "MPI_Imrecv of the survivors");
    }
  }
  phase = Phase::gather;
}

void SparseAllreduce::Impl::unpermute(std::vector<SparsePair>& pairs) {
  for (SparsePair& p : pairs) p.index = static_cast<std::uint32_t>(perm.inverse(p.index));
  sa::sort_by_index(pairs, received);  // received: reduced already, its room is the scratch
}

void SparseAllreduce::Impl::finish() {
  if (compact()) {
    decode_survivors();
    returned_compact();  // in permuted indices, as binned and survivors are
    unpermute(dropped);
  }
  unpermute(survivors);
  if (!compact()) sa::not_among(own.data(), own.size(), survivors, dropped);
  stats.survivors = survivors.size();
  phase = Phase::done;
}

void SparseAllreduce::Impl::advance() {
  requests.clear();
  switch (phase) {
    case Phase::pairs:
      after_batch();
      break;
    case Phase::coarse:
      after_first_histograms();
      break;
    case Phase::fine:
      post_survivor_sends(sa::cut_of(pick, fine_hist));
      break;
    case Phase::gather:
      finish();
      break;
    case Phase::counts:  // test() leaves them once every peer's message is probed
    case Phase::gather_counts:
    case Phase::idle:
    case Phase::done:
      break;
  }
}

SparseAllreduce::SparseAllreduce(MPI_Comm comm, std::uint64_t n, std::uint64_t k, PairWire wire)
    : impl_(std::make_unique<Impl>(comm, false, 0, n, k, wire)) {
  agree(n, k, wire);
}

SparseAllreduce::SparseAllreduce(SharedComm shared, std::uint64_t n, std::uint64_t k,
                                 PairWire wire) {
  const int top = tag_upper_bound(shared.comm);
  if (shared.tag_base < 0 || shared.tag_base > top - (tags - 1))
    throw Error("omgs: sparse allreduce: tags " + std::to_string(shared.tag_base) + ".." +
                std::to_string(static_cast<long long>(shared.tag_base) + tags - 1) +
                " are outside the communicator's 0..MPI_TAG_UB = " + std::to_string(top));
  impl_ = std::make_unique<Impl>(shared.comm, true, shared.tag_base, n, k, wire);
  agree(n, k, wire);
}

void SparseAllreduce::agree(std::uint64_t n, std::uint64_t k, PairWire wire) {
  std::vector<std::uint64_t> mine = {n, k, static_cast<std::uint64_t>(wire)}, mx, mn;
  max_min(impl_->comm, mine, mx, mn);
  std::string err;
  if (mx[0] != mn[0] || mx[1] != mn[1])
    err = "omgs: sparse allreduce: the ranks disagree on the group (elements " +
          std::to_string(mn[0]) + ".." + std::to_string(mx[0]) + ", k " + std::to_string(mn[1]) +
          ".." + std::to_string(mx[1]) + ")";
  else if (mx[2] != mn[2])
    err = "omgs: sparse allreduce: the ranks disagree on pair_wire (" +
          std::string(omgs::to_string(static_cast<PairWire>(mn[2]))) + " and " +
          std::string(omgs::to_string(static_cast<PairWire>(mx[2]))) + ")";
  else if (n > (std::uint64_t{1} << 32))
    err = "omgs: sparse allreduce: a group of " + std::to_string(n) +
          " elements is over 2^32 (indices are 32-bit)";
  else if (wire != PairWire::pairs8 && n > 0xffffffffu)
    err = "omgs: sparse allreduce: a group of " + std::to_string(n) +
          " elements is over 2^32 - 1, the compact pair format's limit";
  else if (wire > PairWire::fp16)
    err = "omgs: sparse allreduce: pair_wire has an unknown value (" +
          std::to_string(static_cast<int>(wire)) + ")";
  if (!err.empty()) throw Error(err);  // every rank saw the same max and min
  MPI_Type_contiguous(static_cast<int>(sizeof(SparsePair)), MPI_BYTE, &impl_->pair_type);
  MPI_Type_commit(&impl_->pair_type);
  impl_->bounds = sa::even_bounds(n, impl_->size);
  impl_->reserve();
}

SparseAllreduce::~SparseAllreduce() {
  if (!impl_ || mpi_finalized()) return;
  try {
    // MPI may still write into the buffers: complete (bounded) before they are freed.
    if (impl_->phase != Phase::idle && impl_->phase != Phase::done) wait(10.0);
  } catch (...) {
  }
  if (impl_->pair_type != MPI_DATATYPE_NULL) MPI_Type_free(&impl_->pair_type);
}

void SparseAllreduce::start(const SparsePair* pairs, std::size_t count) {
  Impl& s = *impl_;
  if (s.phase != Phase::idle && s.phase != Phase::done)
    throw Error(std::string("omgs: sparse allreduce: start() while an exchange is in flight (") +
                to_string(s.phase) + ")");
  s.own.assign(pairs, pairs + count);
  s.post_sends();
}

bool SparseAllreduce::test() {
  Impl& s = *impl_;
  while (s.phase != Phase::idle && s.phase != Phase::done) {
    // The sends are out; the receives wait for every peer's message to be probed.
    if (s.phase == Phase::counts && !s.fill_batch()) return false;
    if (s.phase == Phase::gather_counts) {
      if (!s.probe_all(Impl::kSurvivorsTag, s.compact() ? MPI_UINT32_T : s.pair_type,
                       s.compact() ? s.recv_wcounts : s.recv_counts))
        return false;
      s.post_survivor_receives();
    }
    int flag = 0;
    if (s.phase == Phase::coarse || s.phase == Phase::fine) {
      bool done = false;
      s.check(s.sum.test(done), to_string(s.phase));
      flag = done ? 1 : 0;
    } else {
      s.check(MPI_Testall(static_cast<int>(s.requests.size()), s.requests.data(), &flag,
                          MPI_STATUSES_IGNORE),
              to_string(s.phase));
    }
    if (!flag) return false;
    s.advance();
  }
  return s.phase == Phase::done;
}

bool SparseAllreduce::wait(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!test()) {
    if (impl_->phase == Phase::idle) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

const std::vector<SparsePair>& SparseAllreduce::survivors() const noexcept {
  return impl_->survivors;
}
const std::vector<SparsePair>& SparseAllreduce::dropped() const noexcept {
  return impl_->dropped;
}
const std::vector<std::uint64_t>& SparseAllreduce::bounds() const noexcept {
  return impl_->bounds;
}
const SparseAllreduce::Stats& SparseAllreduce::stats() const noexcept {
  return impl_->stats;
}
SparseAllreduce::Phase SparseAllreduce::phase() const noexcept {
  return impl_->phase;
}

const char* SparseAllreduce::to_string(Phase p) noexcept {
  switch (p) {
    case Phase::idle:
      return "idle";
    case Phase::counts:
      return "MPI_Improbe of the regions' pairs";
    case Phase::pairs:
      return "the regions' pairs, point to point";
    case Phase::coarse:
      return "the sum of the coarse histogram";
    case Phase::fine:
      return "the sum of the fine histogram";
    case Phase::gather_counts:
      return "MPI_Improbe of the survivors";
    case Phase::gather:
      return "the survivors, point to point";
    case Phase::done:
      return "done";
  }
  return "?";
}

}  // namespace omgs::detail
