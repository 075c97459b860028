// Internal: one object per group of the plan in force that exchanges it, one
// implementation per way of exchanging a group (exchange_allgather.cpp: top-k pairs by
// MPI_Iallgatherv; exchange_sparse_allreduce.cpp: top-k pairs by the sparse allreduce;
// exchange_allreduce.cpp: the dense gradient by MPI_Iallreduce). Each owns
// its buffers and its k and does its part of the iteration; the runtime and the engine never
// ask which collective a group uses. make_exchange() looks up the registry of
// group_exchange.cpp (register_exchange; docs/architecture.md, "Adding a collective").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/export.hpp>
#include <omgs/pair_format.hpp>
#include <omgs/plan.hpp>
#include <omgs/runtime.hpp>
#include <omgs/select.hpp>

#include "comm/pair_codec.hpp"

namespace omgs::detail {

/// The per-element buffers every exchange works in, allocated once at construction (the
/// residual in two buffers: ExchangeContext::swapped says which is current).
struct FlatBuffers {
  GradientView grad, resid, resid_alt, agg;
  GradientView velocity;  // momentum correction's u (RuntimeOptions::momentum > 0), else empty
  // RuntimeOptions::gradient_type bf16 / fp16: the user's gradient and the aggregated one in
  // that type (its bits; gradient_type.cpp), else empty.
  Kokkos::View<std::uint16_t*, DeviceMemory> grad16, agg16;
};

/// What the exchanges of one plan share: the flat buffers, which residual buffer is
/// current per group, the selector (sized for the plan's largest group and k) and its
/// output, the failure counter. The selector's execution space instance serves every
/// kernel and fence: constructing an instance heap-allocates in Kokkos 4, and ready() /
/// finish() must not allocate.
struct ExchangeContext {
  using Selector = TopkSelector<ExecSpace>;
  FlatBuffers* flat = nullptr;
  int ranks = 1;
  // Group g's current residual is in resid_alt where swapped[g] is 1, in resid otherwise.
  // Selection with feedback reads the current one and writes the other, which becomes
  // current when it succeeds.
  std::vector<char> swapped;
  const GradientView& resid_of(std::size_t g) const {
    return swapped[g] ? flat->resid_alt : flat->resid;
  }
  const GradientView& resid_next(std::size_t g) const {
    return swapped[g] ? flat->resid : flat->resid_alt;
  }
  std::unique_ptr<Selector> selector;
  Kokkos::View<std::uint32_t*, DeviceMemory> sel_index;
  Kokkos::View<float*, DeviceMemory> sel_value;
  Kokkos::View<int*, DeviceMemory> bad_blocks;  // count kernels, allocated once
  Kokkos::View<int*, DeviceMemory>::HostMirror bad_blocks_host;
  const ExecSpace& exec() const { return selector->execution_space_instance(); }
  PairWire pair_wire = PairWire::pairs8;  ///< the sparse groups' wire format
  bool blocking_allreduce = false;        ///< the dense groups' form (calibration's choice)
  /// The dense groups' values on the wire: fp32, or bf16 / fp16 (RuntimeOptions::dense_wire
  /// resolved: never automatic here).
  DenseWire dense_wire = DenseWire::fp32;
};

/// Where a group's completion reports: the iteration's stats and error, its aggregate
/// interval (NaN unless applied); the engine that exchanged it (what arrived).
struct GroupReport {
  IterationStats& stats;
  std::string& error;
  double& agg_start_s;
  double& agg_end_s;
  const ProgressEngine& engine;
};

/// A group of the plan: its index, its elements in the flat buffers, its name in messages.
struct GroupSlice {
  std::size_t g = 0, offset = 0, numel = 0;
  std::string label;  // "group 3 (layers 'fc.bias' .. 'fc.weight')", built once
};

class GroupExchange {
 public:
  GroupExchange(GroupSlice slice, ExchangeContext& ctx) : slice_(std::move(slice)), ctx_(ctx) {}
  virtual ~GroupExchange() = default;
  GroupExchange(const GroupExchange&) = delete;
  GroupExchange& operator=(const GroupExchange&) = delete;

  /// Entries this rank selects per iteration (0: it sends the group as it is).
  virtual std::size_t k() const noexcept = 0;
  /// The Kokkos profiling region of prepare().
  virtual const std::string& region() const = 0;
  /// The collective's name in the trace (a string literal: it outlives the exchange).
  virtual const char* name() const noexcept = 0;
  /// What the engine posts for this group (its collective and buffers), valid as long as
  /// this object.
  virtual GroupBuffers wire() const = 0;
  /// ready(), once the group's layers are in: select and pack, or stage; the data are
  /// complete (fenced) on return, so the engine may post them.
  virtual void prepare(IterationStats& st) = 0;
  /// After prepare(): whether this rank's data went into the exchange (false: a selection
  /// that found non-finite values left the residual as it was).
  virtual bool contributed() const noexcept { return true; }
  /// Bytes this rank contributes per exchange, and receives when it completes.
  virtual std::size_t bytes_sent() const noexcept = 0;
  virtual std::size_t bytes_received() const noexcept = 0;
  /// finish(): the exchange ended with w; apply it (averaged into the aggregated gradient)
  /// or skip it (this rank's contribution kept in its residual, the slot zeroed).
  virtual void complete(WaitStatus w, GroupReport r) = 0;

  const GroupSlice& slice() const noexcept { return slice_; }
  std::pair<std::size_t, std::size_t> range() const {
    return {slice_.offset, slice_.offset + slice_.numel};
  }

 protected:
  const ExecSpace& exec() const { return ctx_.exec(); }
  FlatBuffers& flat() const { return *ctx_.flat; }
  /// No exchange was applied: the aggregated slot of the group is zero.
  void zero_aggregate() const;
  /// A dense sum not applied (w not ok, or `bad` > 0 non-finite values in the sum, the same
  /// on every rank): this rank's gradient joins its residual where finite (no mass lost),
  /// the slot is zeroed, and the iteration's first failure is named, "omgs: finish(): " +
  /// `exchange` + " <group> ..." or "omgs: " + `sum` + " <group> summed to ...".
  void keep_gradient_in_residual(WaitStatus w, int bad, GroupReport& r, const std::string& exchange,
                                 const std::string& sum) const;

  GroupSlice slice_;
  ExchangeContext& ctx_;
};

/// "completed with an MPI error; ..." or "was never submitted", for failure messages.
std::string collective_failure(WaitStatus w);

/// `pairs` more pairs sent in `bytes`: IterationStats::pairs_sent and the running
/// bytes_per_pair over them.
void count_pairs(IterationStats& st, std::uint64_t pairs, std::uint64_t bytes);

/// Makes the exchange of one group of the plan at the density in force.
using ExchangeFactory = std::function<std::unique_ptr<GroupExchange>(
    GroupSlice slice, double density, ExchangeContext& ctx)>;
/// The run's formats on the wire (RuntimeOptions::pair_wire; dense_wire resolved for the
/// gradient type: fp32, bf16 or fp16).
struct WireFormats {
  PairWire pair = PairWire::pairs8;
  DenseWire dense = DenseWire::fp32;
};
/// Its buffers, in 8-byte items, for the memory check made before anything is allocated
/// (buffers.cpp): a group of n elements, k selected per rank, on P ranks, with the formats
/// in force.
using ExchangeFootprint = std::function<std::uint64_t(
    std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats& formats)>;
/// The registration: `collective`'s exchange and footprint from now on (the built-in
/// collectives are registered at the first use; registering one again replaces it).
/// Thread-safe; plan instances built after it use it.
OMGS_EXPORT void register_exchange(Collective collective, ExchangeFactory factory,
                                   ExchangeFootprint footprint);
/// The exchange of a group of the plan (by Group::collective); throws omgs::Error naming
/// the group if nothing is registered for its collective.
OMGS_EXPORT std::unique_ptr<GroupExchange> make_exchange(Collective collective, GroupSlice slice,
                                                         double density, ExchangeContext& ctx);
/// The registered footprint of `collective` (0 if none is registered).
OMGS_EXPORT std::uint64_t exchange_footprint(Collective collective, std::uint64_t n,
                                             std::uint64_t k, std::uint64_t ranks,
                                             const WireFormats& formats);

OMGS_EXPORT std::unique_ptr<GroupExchange> make_allgather_exchange(GroupSlice slice, double density,
                                                                   ExchangeContext& ctx);
OMGS_EXPORT std::unique_ptr<GroupExchange> make_allreduce_exchange(GroupSlice slice,
                                                                   ExchangeContext& ctx);
/// A dense exchange (the gradient as is, summed, averaged; non-finite sums fail the group on
/// every rank, the rank's gradient back to its residual) on the wire `kind` names (a dense
/// kind: allreduce_sum or allreduce_node), `name` its word in the trace and the messages.
std::unique_ptr<GroupExchange> make_dense_exchange(GroupSlice slice, ExchangeContext& ctx,
                                                   WireKind kind, const char* name);
/// The dense exchange whose wire is the two-level allreduce (Collective::allreduce_node,
/// WireKind::allreduce_node): the flat one's prepare and complete, another wire.
OMGS_EXPORT std::unique_ptr<GroupExchange> make_allreduce_node_exchange(GroupSlice slice,
                                                                        ExchangeContext& ctx);
/// The sparse node-summed exchange (Collective::sparse_node, WireKind::sparse_node): the
/// gradient plus residual summed in the node, the top-k of each rank's shard of the sum
/// (selected by the wire, on the host), averaged; its footprint (an upper bound).
OMGS_EXPORT std::unique_ptr<GroupExchange> make_sparse_node_exchange(GroupSlice slice,
                                                                     double density,
                                                                     ExchangeContext& ctx);
OMGS_EXPORT std::uint64_t sparse_node_footprint(std::uint64_t n, std::uint64_t k,
                                                std::uint64_t ranks);
OMGS_EXPORT std::unique_ptr<GroupExchange> make_sparse_allreduce_exchange(GroupSlice slice,
                                                                          double density,
                                                                          ExchangeContext& ctx);
OMGS_EXPORT std::uint64_t allgather_footprint(std::uint64_t n, std::uint64_t k, std::uint64_t ranks,
                                              PairWire wire);
/// With a 16-bit dense wire, also its send, receive and error buffers (8 bytes an element)
/// and the wire's host shards and sums (2 n + 4 n / P bytes): two 8-byte items an element.
OMGS_EXPORT std::uint64_t allreduce_footprint(std::uint64_t n, std::uint64_t k, std::uint64_t ranks,
                                              DenseWire dense = DenseWire::fp32);
OMGS_EXPORT std::uint64_t sparse_allreduce_footprint(std::uint64_t n, std::uint64_t k,
                                                     std::uint64_t ranks, PairWire wire);

}  // namespace omgs::detail
