// The watchdog protocol of the progress engine (see watchdog.hpp).
#include "comm/watchdog.hpp"

#include <string>

namespace omgs::detail {

namespace {
constexpr int watch_reply_count = 6;
constexpr int tag_query = 1;
constexpr int tag_reply = 2;
}  // namespace

PeerProgress ProgressCounters::snapshot(int rank) const noexcept {
  PeerProgress p;
  p.rank = rank;
  p.responded = true;
  p.posted = posted.load(std::memory_order_relaxed);
  p.completed = completed.load(std::memory_order_relaxed);
  p.submitted = submitted.load(std::memory_order_relaxed);
  p.post_errors = post_errors.load(std::memory_order_relaxed);
  p.last_error_class = last_error_class.load(std::memory_order_relaxed);
  return p;
}

Watchdog::Watchdog(MPI_Comm comm) : comm_(comm, /*errors_return=*/true) {
  rank_ = comm_.rank();
  ranks_ = comm_.size();
  const auto P = static_cast<std::size_t>(ranks_);
  reply_buf_.resize(P);
  reply_req_.assign(P, MPI_REQUEST_NULL);
  send_req_.assign(P, MPI_REQUEST_NULL);
  recv_req_.assign(P, MPI_REQUEST_NULL);
  recv_buf_.resize(P);
  got_.assign(P, 0);
  post_query_receive();
}

Watchdog::~Watchdog() {
  if (mpi_finalized()) return;
  // The receive for queries is cancelled; replies still in flight are given a moment
  // (they are a few bytes, sent eagerly) and otherwise left to MPI.
  if (query_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_req_);
    MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
  }
  for (auto* reqs : {&reply_req_, &send_req_, &recv_req_}) {
    for (MPI_Request& r : *reqs) {
      if (r == MPI_REQUEST_NULL) continue;
      if (reqs == &recv_req_) MPI_Cancel(&r);
      int flag = 0;
      const auto until = deadline_after(0.1);
      while (!flag && Clock::now() < until) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      if (!flag) MPI_Request_free(&r);
    }
  }
}

void Watchdog::post_query_receive() noexcept {
  MPI_Irecv(&query_buf_, 1, MPI_UNSIGNED_LONG_LONG, MPI_ANY_SOURCE, tag_query, comm_.get(),
            &query_req_);
}

void Watchdog::post_reply_receive(int r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  MPI_Irecv(&recv_buf_[i], watch_reply_count, MPI_UNSIGNED_LONG_LONG, r, tag_reply, comm_.get(),
            &recv_req_[i]);
}

bool Watchdog::answer_queries(const ProgressCounters& counters) noexcept {
  if (query_req_ == MPI_REQUEST_NULL) return false;
  int flag = 0;
  MPI_Status st;
  if (MPI_Test(&query_req_, &flag, &st) != MPI_SUCCESS || !flag) return false;
  const int source = st.MPI_SOURCE;
  const unsigned long long round = query_buf_;
  post_query_receive();
  if (source < 0 || source >= ranks_) return true;
  const auto r = static_cast<std::size_t>(source);
  MPI_Request& req = reply_req_[r];
  if (req != MPI_REQUEST_NULL) {
    int sent = 0;
    MPI_Test(&req, &sent, MPI_STATUS_IGNORE);
    if (!sent) return true;  // the previous answer to that rank is still on its way
  }
  const PeerProgress p = counters.snapshot(rank_);
  reply_buf_[r] = {round,       p.posted,      p.completed,
                   p.submitted, p.post_errors, static_cast<unsigned long long>(p.last_error_class)};
  if (MPI_Isend(&reply_buf_[r], watch_reply_count, MPI_UNSIGNED_LONG_LONG, source, tag_reply,
                comm_.get(), &req) != MPI_SUCCESS) {
    req = MPI_REQUEST_NULL;
    return true;
  }
  queries_answered_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Watchdog::start(std::uint64_t needed) noexcept {
  needed_ = needed;
  ++round_;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    got_[i] = 0;
    if (r == rank_) continue;
    // Answers to an earlier round that timed out may still arrive: matched by round below.
    if (recv_req_[i] == MPI_REQUEST_NULL) post_reply_receive(r);
    if (send_req_[i] != MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Test(&send_req_[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) continue;  // the last query to r never left: r is not answering anyway
    }
    MPI_Isend(&round_, 1, MPI_UNSIGNED_LONG_LONG, r, tag_query, comm_.get(), &send_req_[i]);
  }
  deadline_ = deadline_after(timeout_s_);
  state_.store(DiagnosisState::running, std::memory_order_relaxed);
  drive();
}

bool Watchdog::drive() noexcept {
  bool did = false;
  bool all = true;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == rank_ || got_[i]) continue;
    int flag = 0;
    if (recv_req_[i] != MPI_REQUEST_NULL) MPI_Test(&recv_req_[i], &flag, MPI_STATUS_IGNORE);
    if (flag) {
      did = true;
      if (recv_buf_[i].round == round_) {
        got_[i] = 1;
        continue;
      }
      post_reply_receive(r);  // a late answer to an earlier round: listen again
    }
    all = false;
  }
  if (all || Clock::now() > deadline_) {
    // Release: the owner acquires the answers (got_, recv_buf_, needed_).
    state_.store(DiagnosisState::answered, std::memory_order_release);
    did = true;
  }
  return did;
}

bool Watchdog::request(int g, double timeout_s) noexcept {
  if (state() != DiagnosisState::idle) return false;
  group_ = g;
  timeout_s_ = timeout_s;
  state_.store(DiagnosisState::requested, std::memory_order_release);
  return true;
}

Diagnosis Watchdog::collect(int g, int num_groups, const ProgressCounters& own) {
  Diagnosis d;
  d.group = g;
  d.needed = needed_;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    PeerProgress p;
    p.rank = r;
    if (r == rank_) {
      p = own.snapshot(r);
    } else if (got_[i]) {
      const WatchReply& m = recv_buf_[i];
      p.responded = true;
      p.posted = m.posted;
      p.completed = m.completed;
      p.submitted = m.submitted;
      p.post_errors = m.post_errors;
      p.last_error_class = static_cast<int>(m.last_error_class);
    }
    if (!p.responded || p.posted < d.needed) d.lagging.push_back(r);
    d.peers.push_back(p);
  }
  state_.store(DiagnosisState::idle, std::memory_order_release);
  d.report = watchdog_report(d, rank_, num_groups);
  return d;
}

std::string watchdog_report(const Diagnosis& d, int rank, int num_groups) {
  const auto G = static_cast<std::uint64_t>(num_groups);
  auto where = [G](std::uint64_t seq) {
    if (seq == 0) return std::string("nothing posted yet");
    return "posted up to group " + std::to_string((seq - 1) % G) + " of round " +
           std::to_string((seq - 1) / G);
  };
  std::string r = "omgs: watchdog (rank " + std::to_string(rank) + "): group " +
                  std::to_string(d.group) + " of round " + std::to_string((d.needed - 1) / G) +
                  " has not completed. ";
  if (d.lagging.empty())
    return r + "Every rank has posted it; MPI has not completed it (network or MPI library stall).";
  r += "Ranks that have not posted it: ";
  for (std::size_t j = 0; j < d.lagging.size(); ++j) {
    const PeerProgress& p = d.peers[static_cast<std::size_t>(d.lagging[j])];
    if (j > 0) r += "; ";
    r += std::to_string(p.rank) + " (";
    if (!p.responded) {
      r += "no answer: stuck outside omgs, or dead)";
      continue;
    }
    r += where(p.posted);
    if (p.post_errors > 0) {
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      if (MPI_Error_string(p.last_error_class, msg, &len) != MPI_SUCCESS) len = 0;
      r += ", " + std::to_string(p.post_errors) +
           " MPI error(s) posting, last: " + std::string(msg, static_cast<std::size_t>(len));
    }
    r += ")";
  }
  return r + ".";
}

}  // namespace omgs::detail
