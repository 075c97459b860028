// The bounded arrival check before a communicator's first collective (see arrival.hpp).
//
// A collective cannot say which ranks never called it, so the check is point-to-point, on
// the user's communicator (the only one every rank already shares) with a reserved tag:
//   rank r > 0: posts a receive for rank 0's answer, sends rank 0 one int, waits at most
//               2 T for the answer (rank 0 may arrive up to T after r, then waits T);
//   rank 0:     receives from every other rank for at most T, then sends every rank that
//               arrived the list of those that did not (an empty list: all here).
// What a check that fails leaves behind is bounded: rank r's one int to an absent rank 0,
// rank 0's answers to ranks that gave up first (their buffers are leaked on purpose, so MPI
// may still read them); receives are cancelled. The job is meant to end (MPI_Abort).
#include "comm/arrival.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include <omgs/error.hpp>

#include "comm/clock.hpp"

namespace omgs::detail {

namespace {

constexpr auto poll_interval = std::chrono::microseconds(200);
const int arrival_token = 1;  // static storage: a send left pending never reads freed memory

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

/// Tests `req` until it completes or `deadline` passes; then cancels it (a receive) and
/// returns whether it completed with a message (a cancel that came too late does not count
/// as one that succeeded). `st` holds the status of a completed receive.
bool receive_until(MPI_Request& req, Clock::time_point deadline, MPI_Status& st) {
  for (int done = 0;;) {
    MPI_Test(&req, &done, &st);
    if (done) return true;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(poll_interval);
  }
  MPI_Cancel(&req);
  MPI_Wait(&req, &st);  // a cancelled receive completes at once
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  return cancelled == 0;
}

/// Waits a moment for sends that are expected to complete; frees the handles of the rest
/// (MPI still delivers them). Returns true if some were left pending.
bool finish_sends(std::vector<MPI_Request>& reqs, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  for (int done = 0;;) {
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return false;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(poll_interval);
  }
  for (MPI_Request& r : reqs)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  return true;
}

/// Rank 0: the ranks that did not arrive within timeout_s; answers every rank that did.
std::vector<int> count_arrivals(MPI_Comm comm, int size, double timeout_s) {
  const auto P = static_cast<std::size_t>(size);
  std::vector<int> token(P), arrived(P, 0), index(P);
  std::vector<MPI_Request> req(P, MPI_REQUEST_NULL);
  for (int r = 1; r < size; ++r)
    MPI_Irecv(&token[static_cast<std::size_t>(r)], 1, MPI_INT, r, arrival_tag, comm,
              &req[static_cast<std::size_t>(r)]);
  arrived[0] = 1;
  const auto deadline = deadline_after(timeout_s);
  for (int pending = size - 1; pending > 0 && Clock::now() <= deadline;) {
    int n = 0;
    MPI_Testsome(size, req.data(), &n, index.data(), MPI_STATUSES_IGNORE);
    if (n == MPI_UNDEFINED) break;
    for (int i = 0; i < n; ++i)
      arrived[static_cast<std::size_t>(index[static_cast<std::size_t>(i)])] = 1;
    pending -= n;
    if (n == 0) std::this_thread::sleep_for(poll_interval);
  }
  MPI_Status st;
  for (int r = 1; r < size; ++r) {
    MPI_Request& q = req[static_cast<std::size_t>(r)];
    if (q != MPI_REQUEST_NULL && receive_until(q, Clock::now(), st))
      arrived[static_cast<std::size_t>(r)] = 1;  // it came while we gave up
  }
  auto missing = std::make_unique<std::vector<int>>();
  for (int r = 0; r < size; ++r)
    if (!arrived[static_cast<std::size_t>(r)]) missing->push_back(r);
  std::vector<MPI_Request> sends;
  for (int r = 1; r < size; ++r) {
    if (!arrived[static_cast<std::size_t>(r)]) continue;
    sends.push_back(MPI_REQUEST_NULL);
    MPI_Isend(missing->data(), static_cast<int>(missing->size()), MPI_INT, r, arrival_tag, comm,
              &sends.back());
  }
  std::vector<int> result = *missing;
  // The ranks that arrived wait for this answer; one that gave up first never takes it.
  if (finish_sends(sends, std::min(timeout_s, 1.0))) (void)missing.release();
  return result;
}

std::string missing_message(const std::vector<int>& missing, int size, double timeout_s,
                            const std::string& who) {
  const bool one = missing.size() == 1;
  return who + ": " + rank_list(missing) + " of the " + std::to_string(size) +
         " ranks of the communicator did not arrive within " + seconds_text(timeout_s) +
         " s (OMGS_TIMEOUT_S / wait_timeout_s; counted by rank 0): " + (one ? "it" : "they") +
         " failed before reaching " + who + ", or " + (one ? "is" : "are") +
         " stuck elsewhere; end the job (MPI_Abort)";
}

/// Rank r > 0: announces itself to rank 0 and waits for its answer.
void report_arrival(MPI_Comm comm, int size, double timeout_s, const std::string& who) {
  std::vector<int> answer(static_cast<std::size_t>(size));
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  MPI_Irecv(answer.data(), size, MPI_INT, 0, arrival_tag, comm, &recv);
  MPI_Isend(&arrival_token, 1, MPI_INT, 0, arrival_tag, comm, &send);
  MPI_Status st;
  if (!receive_until(recv, deadline_after(2 * timeout_s), st)) {
    MPI_Request_free(&send);  // rank 0 may never receive it: left to MPI
    throw Error(who + ": rank 0, which counts the arrivals, did not answer within " +
                seconds_text(2 * timeout_s) +
                " s (twice OMGS_TIMEOUT_S / wait_timeout_s): it failed before reaching " + who +
                ", or is stuck elsewhere, or gave up before this rank arrived; "
                "whether other ranks arrived is not known here; end the job (MPI_Abort)");
  }
  std::vector<MPI_Request> sends{send};
  finish_sends(sends, timeout_s);  // rank 0 answered, so it has received it
  int n = 0;
  MPI_Get_count(&st, MPI_INT, &n);
  if (n > 0) {
    answer.resize(static_cast<std::size_t>(n));
    throw Error(missing_message(answer, size, timeout_s, who));
  }
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  constexpr std::size_t shown = 16;
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < shown; ++i) {
    if (i > 0) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > shown) s += " and " + std::to_string(ranks.size() - shown) + " more";
  return s;
}

void check_arrival(MPI_Comm comm, double timeout_s, const std::string& who) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  if (rank != 0) return report_arrival(comm, size, timeout_s, who);
  const std::vector<int> missing = count_arrivals(comm, size, timeout_s);
  if (!missing.empty()) throw Error(missing_message(missing, size, timeout_s, who));
}

}  // namespace omgs::detail
