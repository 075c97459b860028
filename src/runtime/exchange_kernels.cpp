// The pair wire format's device kernels (see exchange_kernels.hpp).
#include "runtime/exchange_kernels.hpp"

#include <omgs/detail/kokkos_helpers.hpp>

#include <limits>

namespace omgs::detail::kernels {

void pack_pairs(const ExecSpace& exec, PairView send, std::size_t offset,
                Kokkos::View<std::uint32_t*, DeviceMemory> idx,
                Kokkos::View<float*, DeviceMemory> val, std::size_t k, bool failed) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::pack"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::size_t i) {
        SparsePair p;
        p.index = failed ? failed_marker : idx(i);
        p.value = failed ? 0.0f : val(i);
        send(offset + i) = p;
      });
}

// Counts with atomics into a preallocated counter: Kokkos 4's parallel_reduce builds a long
// fence label (a heap allocation) at every call, whatever the result type.
int count_failed_blocks(const ExecSpace& exec, PairView recv, std::size_t offset, std::size_t k,
                        int ranks, Kokkos::View<int*, DeviceMemory> count,
                        Kokkos::View<int*, DeviceMemory>::HostMirror count_host) {
  if (k == 0) return 0;
  fill_zero(exec, count);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::check_markers"), range_policy(exec, 0, ranks),
      KOKKOS_LAMBDA(const std::int64_t r) {
        if (recv(offset + static_cast<std::size_t>(r) * k).index == failed_marker)
          Kokkos::atomic_add(&count(0), 1);
      });
  Kokkos::deep_copy(exec, count_host, count);
  detail::fence(exec);
  return count_host(0);
}

void poison_pairs(const ExecSpace& exec, PairView send, std::size_t k) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::poison"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::size_t i) {
        SparsePair p;
        p.index = static_cast<std::uint32_t>(i);
        p.value = nan;
        send(i) = p;
      });
}

int count_nonfinite_pairs(const ExecSpace& exec, PairView recv, std::size_t count,
                          Kokkos::View<int*, DeviceMemory> bad,
                          Kokkos::View<int*, DeviceMemory>::HostMirror bad_host) {
  if (count == 0) return 0;
  fill_zero(exec, bad);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::check_survivors"),
      range_policy(exec, 0, static_cast<std::int64_t>(count)), KOKKOS_LAMBDA(const std::size_t i) {
        const float v = recv(i).value;
        if (!(v - v == 0.0f)) Kokkos::atomic_add(&bad(0), 1);  // NaN or +-Inf
      });
  Kokkos::deep_copy(exec, bad_host, bad);
  detail::fence(exec);
  return bad_host(0);
}

void scatter_add(const ExecSpace& exec, PairView recv, std::size_t recv_offset, std::size_t count,
                 GradientView agg, std::size_t group_offset, std::size_t numel, float scale) {
  auto out = Kokkos::subview(agg, std::make_pair(group_offset, group_offset + numel));
  fill_zero(exec, out);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::scatter_add"),
      range_policy(exec, 0, static_cast<std::int64_t>(count)), KOKKOS_LAMBDA(const std::size_t i) {
        const SparsePair p = recv(recv_offset + i);
        Kokkos::atomic_add(&out(p.index), p.value * scale);
      });
}

void add_back(const ExecSpace& exec, PairView send, std::size_t offset, std::size_t k,
              GradientView resid, std::size_t group_offset) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::restore"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::size_t i) {
        const SparsePair p = send(offset + i);
        resid(group_offset + p.index) += p.value;
      });
}

namespace {

/// The pair buffer as 32-bit words (the block's unit); MPI and the kernels only copy bytes.
using WordView =
    Kokkos::View<std::uint32_t*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
WordView words_of(PairView buf) {
  return WordView(reinterpret_cast<std::uint32_t*>(buf.data()), buf.extent(0) * 2);
}

}  // namespace

void encode_block(const ExecSpace& exec, const PairLayout& layout, PairView send,
                  Kokkos::View<std::uint32_t*, DeviceMemory> idx,
                  Kokkos::View<float*, DeviceMemory> val, GradientView resid, bool failed) {
  encode_pairs(exec, layout, idx, val, resid, words_of(send), failed);
}

void decode_blocks(const ExecSpace& exec, const PairLayout& layout, PairView buf, int blocks,
                   StartView starts, GradientView out, std::size_t group_offset, float scale,
                   bool zero) {
  auto slot = Kokkos::subview(out, std::make_pair(group_offset, group_offset + layout.n));
  if (zero) fill_zero(exec, slot);
  decode_pairs(exec, layout, words_of(buf), blocks, starts, slot, scale);
}

void unpack_and_scatter(const ExecSpace& exec, const PairLayout& layout, PairView buf, int blocks,
                        StartView starts, PairView pairs, GradientView agg,
                        std::size_t group_offset, float scale) {
  detail::pairs::unpack(exec, layout, words_of(buf), blocks, starts, pairs);
  scatter_add(exec, pairs, 0, layout.k * static_cast<std::size_t>(blocks), agg, group_offset,
              layout.n, scale);
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> d(
      static_cast<char*>(dst), bytes);
  Kokkos::View<const char*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> s(
      static_cast<const char*>(src), bytes);
  Kokkos::deep_copy(d, s);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  Kokkos::View<char*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> d(
      static_cast<char*>(dst), bytes);
  Kokkos::View<const char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> s(
      static_cast<const char*>(src), bytes);
  Kokkos::deep_copy(d, s);
}

}  // namespace omgs::detail::kernels
