// Internal: a wire's send and receive buffers as MPI sees them: the caller's, or host
// mirrors of them where the caller's are on the device and MPI is not GPU-aware (staging).
// The wires of every collective stage through it (wire_*.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include <omgs/comm.hpp>

namespace omgs::detail {

template <class T>
class StagedBuffers {
 public:
  StagedBuffers(const T* send, T* recv) : send_(send), recv_(recv) {}

  /// At set-up: with staging, host mirrors of `send_items` and `recv_items` items, which
  /// MPI then sees instead of the caller's buffers.
  void init(bool staging, std::size_t send_items, std::size_t recv_items) {
    staging_ = staging;
    mpi_send_ = send_;
    mpi_recv_ = recv_;
    if (!staging) return;
    host_send_.resize(send_items);
    host_recv_.resize(recv_items);
    mpi_send_ = host_send_.data();
    mpi_recv_ = host_recv_.data();
  }
  /// [S] staging: this rank's first `count` items to the send mirror.
  void stage_out(const CopyFunction& to_host, std::size_t count) noexcept {
    if (count > 0) to_host(host_send_.data(), send_, count * sizeof(T));
  }
  /// [O] staging: the first `count` received items back to the caller's receive buffer.
  void stage_in(const CopyFunction& to_device, std::size_t count) const noexcept {
    if (count > 0) to_device(recv_, host_recv_.data(), count * sizeof(T));
  }

  bool staging() const noexcept { return staging_; }
  const T* send() const noexcept { return send_; }
  T* recv() const noexcept { return recv_; }
  /// What MPI sends from and receives into: the mirrors when staging.
  const T* mpi_send() const noexcept { return mpi_send_; }
  T* mpi_recv() const noexcept { return mpi_recv_; }

 private:
  const T* send_;
  T* recv_;
  bool staging_ = false;
  const T* mpi_send_ = nullptr;
  T* mpi_recv_ = nullptr;
  std::vector<T> host_send_, host_recv_;  // staging mirrors (empty unless staging)
};

}  // namespace omgs::detail
