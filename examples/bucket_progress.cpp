// The dense baseline's communication driver (see bucket_progress.hpp).
#include "bucket_progress.hpp"
#include "bounded_mpi.hpp"

#include <chrono>
#include <utility>

namespace omgs_examples {

namespace {

/// The polling period while collectives are in flight.
constexpr std::chrono::microseconds poll_period{50};

}  // namespace

BucketProgress::BucketProgress(MPI_Comm comm, int buckets, Post post, Done done, bool threaded)
    : comm_(comm),
      buckets_(buckets),
      post_(std::move(post)),
      done_(std::move(done)),
      threaded_(threaded),
      req_(static_cast<std::size_t>(buckets), MPI_REQUEST_NULL),
      indices_(static_cast<std::size_t>(buckets) + 1) {
  if (threaded_) thread_ = std::thread([this] { thread_main(); });
}

BucketProgress::~BucketProgress() {
  if (!threaded_) {
    drain(ready_);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void BucketProgress::start() {
  std::lock_guard<std::mutex> lock(m_);  // the thread is idle: the last finish() saw complete_
  ready_ = 0;
  posted_ = completed_ = 0;
  complete_ = false;
}

void BucketProgress::ready(int b) {
  if (!threaded_) {
    ready_ = b + 1;
    step(ready_);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    ready_ = b + 1;
  }
  wake_.notify_one();
}

void BucketProgress::finish(const char* what) {
  if (!threaded_) {
    complete_until(buckets_, ready_, what);
    return;
  }
  std::unique_lock<std::mutex> lock(m_);
  if (!all_done_.wait_until(lock, job_deadline(), [this] { return complete_; }))
    abort_past_bound(comm_, what);
}

bool BucketProgress::step(int ready) {
  bool did = false;
  for (; posted_ < ready; ++posted_, did = true) {
    MPI_Request& req = req_[static_cast<std::size_t>(posted_)];
    post_(posted_, &req);
    if (req == MPI_REQUEST_NULL) {  // a blocking collective: complete already
      done_(posted_);
      ++completed_;
    }
  }
  if (completed_ == posted_) return did;
  // MPI_Testsome, not MPI_Testall: MPICH 4.0's MPI_Testall asserts on a mix of collective
  // and null requests.
  int n = 0;
  MPI_Testsome(buckets_, req_.data(), &n, indices_.data(), MPI_STATUSES_IGNORE);
  if (n == MPI_UNDEFINED) return did;
  for (int i = 0; i < n; ++i, ++completed_) done_(indices_[static_cast<std::size_t>(i)]);
  return did || n > 0;
}

void BucketProgress::complete_until(int target, int ready, const char* what) {
  const auto deadline = job_deadline();
  while (completed_ < target) {
    if (step(ready)) continue;
    if (std::chrono::steady_clock::now() > deadline) abort_past_bound(comm_, what);
    std::this_thread::sleep_for(poll_period);
  }
}

void BucketProgress::drain(int ready) {
  step(ready);  // a bucket handed over is posted, as on every other rank
  complete_until(posted_, ready, "the dense baseline's allreduce in flight at shutdown");
}

void BucketProgress::thread_main() {
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    wake_.wait(lock, [this] {
      return stop_ || (!complete_ && (ready_ > posted_ || posted_ > completed_));
    });
    // Stopping (the owner is destroyed, e.g. after an exception mid-iteration).
    if (stop_) {
      const int ready = ready_;
      lock.unlock();
      drain(ready);
      return;
    }
    const int ready = ready_;
    lock.unlock();
    const bool did = step(ready);
    const bool all = completed_ == buckets_;
    if (!did && !all) std::this_thread::sleep_for(poll_period);
    lock.lock();
    if (all) {
      complete_ = true;
      all_done_.notify_all();
    }
  }
}

}  // namespace omgs_examples
