// The dense baseline's communication driver: posts each bucket's allreduce in bucket order
// as soon as its data is in place and completes them, from a thread of its own (as PyTorch
// DDP's reducer and Horovod's background thread drive theirs) or inline, in the caller's
// calls, where MPI is below MPI_THREAD_MULTIPLE.
//
// A thread matters because MPI's non-blocking collectives advance only inside MPI calls
// (Open MPI's libnbc, MPICH without async progress): a backward pass that calls MPI once per
// layer leaves the wire idle between calls. The thread polls every 50 us while anything is
// in flight (omgs's own progress thread polls as often, IdleOptions::sleep_s) and sleeps on a
// condition variable otherwise. It also runs the per-bucket completion (the averaging), so
// that it overlaps the buckets still in flight.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace omgs_examples {

class BucketProgress {
 public:
  /// Posts bucket b's non-blocking collective into *req; a blocking collective runs to its
  /// end inside the call and leaves *req = MPI_REQUEST_NULL (done then follows at once).
  using Post = std::function<void(int b, MPI_Request* req)>;
  /// Bucket b's collective is complete (called once per bucket and iteration, on the
  /// thread that completed it).
  using Done = std::function<void(int b)>;

  /// `threaded`: drive from a thread of its own (needs MPI_THREAD_MULTIPLE).
  BucketProgress(MPI_Comm comm, int buckets, Post post, Done done, bool threaded);
  ~BucketProgress();
  BucketProgress(const BucketProgress&) = delete;
  BucketProgress& operator=(const BucketProgress&) = delete;

  /// A new iteration: no bucket ready, none posted.
  void start();
  /// Bucket b's data is in place. Buckets come in order 0, 1, ... once an iteration.
  void ready(int b);
  /// Returns once every bucket's collective is complete and done; past job_bound.timeout_s
  /// (--collective-timeout) the job is aborted naming `what` (examples/bounded_mpi.hpp).
  void finish(const char* what);
  bool threaded() const { return threaded_; }

 private:
  void thread_main();
  /// Posts the buckets ready and not yet posted, tests those in flight, runs done for each
  /// completed one; true if it did anything. Caller: the thread, or the owner when inline.
  bool step(int ready);
  /// Steps until `target` buckets are complete, polling every 50 us; past job_bound the job
  /// is aborted naming `what`. Caller: the owner when inline, or the stopping thread.
  void complete_until(int target, int ready, const char* what);
  /// Posts the buckets handed over by ready() (every rank does, so the collective streams
  /// stay matched) and completes them (MPI may still write into the owner's buffers),
  /// bounded by job_bound. For the destructor, e.g. after an exception mid-iteration.
  void drain(int ready);

  MPI_Comm comm_;
  int buckets_;
  Post post_;
  Done done_;
  bool threaded_;
  std::vector<MPI_Request> req_;
  std::vector<int> indices_;
  int posted_ = 0, completed_ = 0;  // owned by whoever steps (the thread, or the owner)
  // Shared with the thread, under m_:
  std::mutex m_;
  std::condition_variable wake_, all_done_;
  int ready_ = 0;
  bool complete_ = true, stop_ = false;
  std::thread thread_;
};

}  // namespace omgs_examples
