// The sparse allreduce's histogram sums by point-to-point messages (tagged_sum.hpp).
#include "comm/tagged_sum.hpp"

#include <algorithm>

namespace omgs::detail {

int TaggedSum::start(MPI_Comm comm, int tag, std::int64_t* data, int count, int min_tail) {
  comm_ = comm;
  tag_ = tag;
  data_ = data;
  count_ = count;
  min_tail_ = min_tail;
  sends_ = 0;
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  pow2_ = 1;
  rounds_ = 0;
  while (pow2_ * 2 <= size_) {
    pow2_ *= 2;
    ++rounds_;
  }
  peer_.resize(static_cast<std::size_t>(count));
  done_ = false;
  step_ = -1;
  return post_step();
}

int TaggedSum::post_step() {
  combine_pending_ = result_pending_ = false;
  reqs_[0] = reqs_[1] = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  const int extra = size_ - pow2_;
  if (rank_ >= pow2_) {  // folded: send, then the result comes back; no other step
    if (step_ != -1) {
      done_ = true;
      return MPI_SUCCESS;
    }
    ++sends_;
    rc = MPI_Isend(data_, count_, MPI_INT64_T, rank_ - pow2_, tag_, comm_, &reqs_[0]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Irecv(peer_.data(), count_, MPI_INT64_T, rank_ - pow2_, tag_, comm_, &reqs_[1]);
    result_pending_ = true;
    return rc;
  }
  for (; step_ <= rounds_; ++step_) {
    if (step_ == -1 && rank_ < extra) {
      combine_pending_ = true;
      return MPI_Irecv(peer_.data(), count_, MPI_INT64_T, rank_ + pow2_, tag_, comm_, &reqs_[1]);
    }
    if (step_ >= 0 && step_ < rounds_) {
      const int partner = rank_ ^ (1 << step_);
      ++sends_;
      rc = MPI_Isend(data_, count_, MPI_INT64_T, partner, tag_, comm_, &reqs_[0]);
      if (rc == MPI_SUCCESS)
        rc = MPI_Irecv(peer_.data(), count_, MPI_INT64_T, partner, tag_, comm_, &reqs_[1]);
      combine_pending_ = true;
      return rc;
    }
    if (step_ == rounds_ && rank_ < extra) {
      ++sends_;
      return MPI_Isend(data_, count_, MPI_INT64_T, rank_ + pow2_, tag_, comm_, &reqs_[0]);
    }
  }
  done_ = true;
  return MPI_SUCCESS;
}

void TaggedSum::combine() {
  const int summed = count_ - min_tail_;
  for (int i = 0; i < summed; ++i) data_[i] += peer_[static_cast<std::size_t>(i)];
  for (int i = summed; i < count_; ++i)
    data_[i] = std::min(data_[i], peer_[static_cast<std::size_t>(i)]);
}

int TaggedSum::test(bool& done) {
  while (!done_) {
    int flag = 0;
    const int rc = MPI_Testall(2, reqs_, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) break;
    if (combine_pending_) combine();
    if (result_pending_) std::copy(peer_.begin(), peer_.end(), data_);
    ++step_;
    const int posted = post_step();
    if (posted != MPI_SUCCESS) return posted;
  }
  done = done_;
  return MPI_SUCCESS;
}

}  // namespace omgs::detail
