// Internal: a non-blocking allreduce of int64 counts by point-to-point messages of one tag,
// for the sparse allreduce's histogram rounds on a communicator that other groups share
// (sparse_allreduce_impl.hpp). A collective would have to be posted in the same order on
// every rank, which groups advanced as their data arrives cannot promise; messages of one
// tag match by (source, tag) alone.
//
// Recursive doubling over the largest power of two p' <= P: ranks r >= p' first fold their
// counts into r - p' and get the result back from it at the end. Within one call every
// ordered pair of ranks exchanges at most one message, and a rank posts the receives of its
// calls in call order, so MPI's non-overtaking rule matches each message to its own call even
// where the calls of one tag follow each other (the first and the fine histogram rounds, the
// next exchange's): no call's message is taken by another.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include <omgs/export.hpp>

namespace omgs::detail {

class OMGS_EXPORT TaggedSum {
 public:
  /// Starts the sum over the ranks of comm of data[0, count): the first count - min_tail
  /// values are summed, the last min_tail take their minimum. data must stay valid until
  /// test() returns true; the result is written there. Returns MPI's code of the first post.
  int start(MPI_Comm comm, int tag, std::int64_t* data, int count, int min_tail);
  /// Advances without blocking: MPI_SUCCESS and done = true once the result is in data, or
  /// MPI's error code.
  int test(bool& done);
  /// Room for sums of up to `count` values (a warm call does not allocate).
  void reserve(int count) { peer_.reserve(static_cast<std::size_t>(count)); }
  /// Messages this rank sent in the last call (its bytes: sends x count x 8).
  int sends() const noexcept { return sends_; }

 private:
  int post_step();  // the step `step_` names: its sends and receives
  void combine();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_ = 0, rank_ = 0, size_ = 1, pow2_ = 1;
  std::int64_t* data_ = nullptr;
  int count_ = 0, min_tail_ = 0, sends_ = 0;
  // -1: fold (r < P - p' receives from r + p'; r >= p' sends to r - p' and waits for the
  // result); 0 .. log2(p') - 1: the doubling rounds (mask 1 << step_); log2(p'): the result
  // to r + p'; then done.
  int step_ = 0, rounds_ = 0;
  bool done_ = true, combine_pending_ = false, result_pending_ = false;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::vector<std::int64_t> peer_;
};

}  // namespace omgs::detail
