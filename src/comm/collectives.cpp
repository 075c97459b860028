// The small collective steps of the runtime and the C API (see collectives.hpp).
#include "comm/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/error.hpp>

#include "comm/arrival.hpp"
#include "comm/backoff.hpp"
#include "comm/clock.hpp"
#include "comm/layout.hpp"
#include "comm/machine_ranks.hpp"
#include "comm/pinning.hpp"

namespace omgs::detail {

void require_mpi_active(const std::string& who) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error(who + ": MPI is not initialized (call MPI_Init_thread first)");
  if (mpi_finalized()) throw Error(who + ": MPI is already finalized");
}

bool mpi_finalized() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

OwnedComm::OwnedComm(MPI_Comm comm, bool errors_return) {
  MPI_Comm_dup(comm, &comm_);
  // Errors come back as return codes (whatever the user's handler): see docs/comm.md.
  if (errors_return) MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

OwnedComm::OwnedComm(MPI_Comm comm, double timeout_s, const std::string& who) {
  check_arrival(comm, timeout_s, who);  // names the ranks that never arrive
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Comm_idup(comm, &comm_, &req);
  const auto deadline = deadline_after(timeout_s);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (Clock::now() > deadline) {
      // The request cannot be cancelled (it is a collective): it is left pending and the
      // communicator handle is not ours; the caller ends the job (MPI_Abort).
      comm_ = MPI_COMM_NULL;
      throw Error(who +
                  ": every rank arrived, but duplicating the communicator did not "
                  "complete within " +
                  std::to_string(timeout_s) +
                  " s (OMGS_TIMEOUT_S / wait_timeout_s): a rank failed since; end the job "
                  "(MPI_Abort)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

OwnedComm::~OwnedComm() {
  // Legal with pending operations: they complete normally.
  if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
}

FinalizeHook::FinalizeHook(std::function<void()> on_finalize) : fn_(std::move(on_finalize)) {
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &FinalizeHook::on_delete, &keyval_, this);
  MPI_Comm_set_attr(MPI_COMM_SELF, keyval_, this);
}

FinalizeHook::~FinalizeHook() {
  fn_ = nullptr;  // deleting the attribute below calls on_delete: it must do nothing
  if (keyval_ == MPI_KEYVAL_INVALID || mpi_finalized()) return;
  MPI_Comm_delete_attr(MPI_COMM_SELF, keyval_);
  MPI_Comm_free_keyval(&keyval_);
}

int FinalizeHook::on_delete(MPI_Comm, int, void*, void* extra) noexcept {
  auto* self = static_cast<FinalizeHook*>(extra);
  if (self->fn_) {
    auto fn = std::move(self->fn_);
    self->fn_ = nullptr;
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "omgs: warning: at MPI_Finalize: %s\n", e.what());
    }
  }
  return MPI_SUCCESS;
}

void agree_on_error(MPI_Comm comm, const std::string& local_error, const std::string& who) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  struct {
    int failed;
    int rank;
  } in{local_error.empty() ? 0 : 1, rank}, out{0, 0};
  // The lowest failing rank: MAXLOC on failed, ties -> the lower rank.
  MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, comm);
  if (out.failed == 0) return;
  if (!local_error.empty()) throw Error(local_error);
  throw Error(who + ": another rank rejected its input (rank " + std::to_string(out.rank) +
              ", see that rank's error); every rank stops");
}

void max_min(MPI_Comm comm, const std::vector<std::uint64_t>& x, std::vector<std::uint64_t>& mx,
             std::vector<std::uint64_t>& mn) {
  // Elementwise max over ranks of x and of ~x, i.e. max and min of each value.
  std::vector<std::uint64_t> in(2 * x.size()), out(2 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    in[2 * i] = x[i];
    in[2 * i + 1] = ~x[i];
  }
  MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_UINT64_T, MPI_MAX, comm);
  mx.resize(x.size());
  mn.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    mx[i] = out[2 * i];
    mn[i] = ~out[2 * i + 1];
  }
}

void max_over_ranks(MPI_Comm comm, std::vector<double>& values) {
  std::vector<double> out(values.size());
  MPI_Allreduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                comm);
  values = std::move(out);
}

std::vector<double> mean_from_root(MPI_Comm comm, const std::vector<double>& values) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = static_cast<int>(values.size());
  std::vector<double> sum(values.size(), 0.0);
  MPI_Reduce(values.data(), sum.data(), n, MPI_DOUBLE, MPI_SUM, 0, comm);
  if (rank == 0)
    for (double& x : sum) x = std::isfinite(x) && x > 0 ? x / size : 0.0;
  MPI_Bcast(sum.data(), n, MPI_DOUBLE, 0, comm);
  return sum;
}

int ranks_on_node(MPI_Comm comm) {
  return std::max(1, shared_memory_ranks(comm).count);
}

void wait_as_progress_thread(MPI_Request& req, const IdleOptions& idle) {
  Backoff backoff(idle);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    backoff.pause(true);
  }
}

void barrier_as_progress_thread(MPI_Comm comm, const IdleOptions& idle) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  wait_as_progress_thread(req, idle);
}

IdleOptions progress_idle(MPI_Comm comm, int compute_threads) {
  Pinner pinner;
  RankLayout l;
  l.compute_threads = std::max(1, compute_threads);
  l.cores = pinner.process_cores();
  const int sharing = machine_ranks(comm).count;  // collective: every rank, bound or not
  if (pinner.process_unbound()) l.sharing_ranks = sharing;
  if (oversubscribed(l)) return idle_for_layout(IdleOptions{}, l);
  IdleOptions busy;
  busy.spin_iterations = std::numeric_limits<int>::max();
  return busy;
}

std::vector<double> time_allgather(MPI_Comm comm, std::size_t bytes_per_rank, int repetitions,
                                   const IdleOptions& idle) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const auto P = static_cast<std::size_t>(size);
  std::vector<char> sendbuf(bytes_per_rank), recvbuf(bytes_per_rank * P);
  std::vector<int> counts(P, static_cast<int>(bytes_per_rank)), displs(P);
  for (std::size_t r = 0; r < P; ++r) displs[r] = static_cast<int>(bytes_per_rank * r);
  std::vector<double> t;
  for (int r = 0; r < repetitions; ++r) {
    barrier_as_progress_thread(comm, idle);
    const double a = now_s();
    MPI_Request req;
    MPI_Iallgatherv(sendbuf.data(), counts[0], MPI_BYTE, recvbuf.data(), counts.data(),
                    displs.data(), MPI_BYTE, comm, &req);
    wait_as_progress_thread(req, idle);
    t.push_back(now_s() - a);
  }
  barrier_as_progress_thread(comm, idle);  // nobody leaves to poll while another is timed
  return t;
}

bool progress_thread_available(bool force_inline) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return !force_inline && level >= MPI_THREAD_SERIALIZED;
}

std::vector<double> time_sparse_allreduce(MPI_Comm comm, std::uint64_t numel, std::uint64_t k,
                                          const std::vector<SparsePair>& pairs, int repetitions,
                                          double timeout_s) {
  SparseAllreduce exchange(comm, numel, k);
  std::vector<double> t;
  for (int r = 0; r <= repetitions; ++r) {
    MPI_Barrier(comm);
    const double a = now_s();
    exchange.start(pairs.data(), pairs.size());
    if (!exchange.wait(timeout_s))
      throw Error("omgs: calibration: the sparse allreduce of k = " + std::to_string(k) +
                  " did not complete within " + std::to_string(timeout_s) + " s (step " +
                  SparseAllreduce::to_string(exchange.phase()) + ")");
    if (r > 0) t.push_back(now_s() - a);  // the first run warms up
  }
  return t;
}

int tag_upper_bound(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &flag);
  // The standard guarantees at least 32767; an MPI that does not say gets that.
  return flag && value != nullptr ? *static_cast<int*>(value) : 32767;
}

std::pair<int, int> rank_and_size(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return {rank, size};
}

void abort_job(MPI_Comm comm, int code) noexcept {
  MPI_Abort(comm, code);
  std::abort();  // MPI_Abort does not return; if an MPI library did, do not go on
}

}  // namespace omgs::detail
