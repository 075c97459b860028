// Internal: the pair wire format on the device. A group's pairs are SparsePair
// (<omgs/comm.hpp>); a rank that cannot contribute sends the failure marker instead.
// Device kernels are free functions with external linkage: CUDA's extended lambdas may not
// sit in member functions or in functions with internal linkage (an anonymous namespace).
#pragma once

#include <cstddef>
#include <cstdint>

#include <omgs/pair_format.hpp>
#include <omgs/runtime.hpp>

namespace omgs::detail::kernels {

/// A rank that cannot contribute a group (non-finite gradient) sends pairs with this index:
/// every rank sees it and skips the group, so all ranks fail the step together.
constexpr std::uint32_t failed_marker = 0xFFFFFFFFu;

using PairView = Kokkos::View<SparsePair*, DeviceMemory>;

/// send[offset, offset + k) = the selected (index, value), or markers when `failed`.
void pack_pairs(const ExecSpace& exec, PairView send, std::size_t offset,
                Kokkos::View<std::uint32_t*, DeviceMemory> idx,
                Kokkos::View<float*, DeviceMemory> val, std::size_t k, bool failed);

/// How many ranks' blocks of k pairs (from recv[offset]) start with the marker; counts
/// into a preallocated counter and its host mirror.
int count_failed_blocks(const ExecSpace& exec, PairView recv, std::size_t offset, std::size_t k,
                        int ranks, Kokkos::View<int*, DeviceMemory> count,
                        Kokkos::View<int*, DeviceMemory>::HostMirror count_host);

/// A rank that cannot contribute to a sparse allreduce sends send[i] = (i, NaN), i < k: NaN
/// survives the global selection, so every rank sees it (k <= the group's size).
void poison_pairs(const ExecSpace& exec, PairView send, std::size_t k);

/// How many of recv[0, count) have a non-finite value (counter and mirror as above).
int count_nonfinite_pairs(const ExecSpace& exec, PairView recv, std::size_t count,
                          Kokkos::View<int*, DeviceMemory> bad,
                          Kokkos::View<int*, DeviceMemory>::HostMirror bad_host);

/// agg[group] = 0, then agg[group_offset + index] += value * scale for `count` pairs.
void scatter_add(const ExecSpace& exec, PairView recv, std::size_t recv_offset, std::size_t count,
                 GradientView agg, std::size_t group_offset, std::size_t numel, float scale);

/// resid[group_offset + index] += value for this rank's k pairs (the selection goes back).
void add_back(const ExecSpace& exec, PairView send, std::size_t offset, std::size_t k,
              GradientView resid, std::size_t group_offset);

/// The compact pair format (PairWire fp32 / bf16 / fp16) in the same pair buffers: a block
/// is layout.words / 2 pairs' worth of bytes; its first word is the failure marker where
/// pack_pairs puts it, so count_failed_blocks works on both forms.
using StartView = Kokkos::View<std::size_t*, DeviceMemory>;

/// The selection's block into send[0, layout.words / 2) (markers when `failed`); for 16-bit
/// values the rounding error goes into resid (the group's current residual).
void encode_block(const ExecSpace& exec, const PairLayout& layout, PairView send,
                  Kokkos::View<std::uint32_t*, DeviceMemory> idx,
                  Kokkos::View<float*, DeviceMemory> val, GradientView resid, bool failed);

/// out[group] += value * scale for every pair of `blocks` blocks in buf, zeroing the group's
/// slot first when `zero` (the aggregate) and not when adding back into the residual.
void decode_blocks(const ExecSpace& exec, const PairLayout& layout, PairView buf, int blocks,
                   StartView starts, GradientView out, std::size_t group_offset, float scale,
                   bool zero);

/// decode_blocks with zero: the blocks unpacked into `pairs` (at least blocks * layout.k),
/// then scatter_add's kernel; several times faster on the host than the one-pass decode.
void unpack_and_scatter(const ExecSpace& exec, const PairLayout& layout, PairView buf, int blocks,
                        StartView starts, PairView pairs, GradientView agg,
                        std::size_t group_offset, float scale);

/// Staging through host mirrors when MPI is not GPU-aware (ProgressOptions::copy_to_*).
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_to_device(void* dst, const void* src, std::size_t bytes);

}  // namespace omgs::detail::kernels
