// The example jobs' own MPI collectives, bounded: a peer that failed or left must not hang
// the survivors. Past the bound the job is aborted (MPI_Abort), since MPI_Finalize could
// block on the lost peer as well (docs/reliability.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <mpi.h>

namespace omgs_examples {

/// The job's name and the bound of its own collectives (--collective-timeout); set once by
/// main() after parsing the options, read by the bounded helpers below.
struct JobBound {
  const char* program = "omgs-example";
  double timeout_s = 300.0;
};
inline JobBound job_bound;

/// Prints "<program>: rank R: <message>; aborting the job" and calls MPI_Abort.
[[noreturn]] inline void abort_job(MPI_Comm comm, const char* program, const std::string& message) {
  int rank = -1;
  MPI_Comm_rank(comm, &rank);
  std::fprintf(stderr, "%s: rank %d: %s; aborting the job\n", program, rank, message.c_str());
  std::fflush(stderr);
  // A moment for the launcher to forward the line: MPICH's hydra tore the job down before
  // forwarding it once (CI, omgs_example.synthetic_peer_left with MPICH).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(comm, 1);
  std::abort();  // not reached
}

/// When a wait that starts now passes the job's bound.
inline std::chrono::steady_clock::time_point job_deadline() {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(job_bound.timeout_s));
}

/// Aborts the job: `what` did not complete within the job's bound.
[[noreturn]] inline void abort_past_bound(MPI_Comm comm, const std::string& what) {
  abort_job(comm, job_bound.program,
            what + " did not complete within " + std::to_string(job_bound.timeout_s) +
                " s (--collective-timeout): a peer failed or left");
}

/// Completes `count` requests, or aborts the job after job_bound.timeout_s seconds naming
/// `what`.
inline void wait_or_abort(int count, MPI_Request* req, MPI_Comm comm, const char* what) {
  const auto deadline = job_deadline();
  std::vector<int> indices(static_cast<std::size_t>(count) + 1);
  for (;;) {
    // MPI_Testsome, not MPI_Testall: MPICH 4.0's MPI_Testall asserts on a mix of
    // collective and null requests. MPI_UNDEFINED: every request is complete (null).
    int done = 0;
    MPI_Testsome(count, req, &done, indices.data(), MPI_STATUSES_IGNORE);
    if (done == MPI_UNDEFINED) return;
    if (std::chrono::steady_clock::now() > deadline) abort_past_bound(comm, what);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// MPI_Allreduce bounded by the job's bound (see wait_or_abort).
inline void allreduce_or_abort(const void* send, void* recv, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm, const char* what) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallreduce(send, recv, count, type, op, comm, &req);
  wait_or_abort(1, &req, comm, what);
}

/// MPI_Barrier bounded by the job's bound.
inline void barrier_or_abort(MPI_Comm comm, const char* what) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm, &req);
  wait_or_abort(1, &req, comm, what);
}

/// MPI_Bcast bounded by the job's bound.
inline void bcast_or_abort(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                           const char* what) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibcast(buf, count, type, root, comm, &req);
  wait_or_abort(1, &req, comm, what);
}

/// MPI_Finalize, bounded: past `timeout_s` the rank prints why and leaves with `status`
/// (_exit; everything the job had to say is printed by then). MPICH 4.0.2 ch4:ucx over TCP
/// (the emulated cluster) hangs in MPI_Finalize about once in 15 jobs: one rank waits in the
/// PMI barrier while the other progresses UCX to close its endpoint to it, which needs the
/// first one's progress (docs/reliability.md). Returns `status` when MPI_Finalize returns.
inline int finalize_bounded(int status, double timeout_s = 30.0) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done; })) return;
    std::fprintf(stderr,
                 "%s: rank %d: MPI_Finalize did not return within %g s (the MPI library hangs "
                 "in its shutdown; see docs/reliability.md); exiting with status %d\n",
                 job_bound.program, rank, timeout_s, status);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(status);
  });
  MPI_Finalize();
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  return status;
}

}  // namespace omgs_examples
