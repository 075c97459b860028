// Internal: how one group's data travels, one implementation per collective
// (wire_allgatherv.cpp: the pairs' MPI_Iallgatherv; wire_allreduce.cpp: the dense sum's
// MPI_Iallreduce; wire_allreduce16.cpp: its 16-bit form; wire_sparse_allreduce.cpp: the phased
// sparse allreduce). The driver posts whatever a group's wire posts, in plan order; it never asks
// which collective a group uses. make_wire() is the one place that maps a caller's GroupBuffers to
// its wire, by its kind through the registry of wire.cpp (docs/architecture.md, "Adding a
// collective").
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <omgs/comm.hpp>
#include <omgs/export.hpp>

namespace omgs::detail {

struct GroupState;
class NodeComms;

/// What every wire posts on: the engine's data communicator and pair datatype; and, for a
/// phased wire, the communicator that every phased wire of the engine shares, each with its
/// own tags on it (tag_base .. tag_base + tags() - 1, given out by the engine in group order).
struct WireContext {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Datatype pair_type = MPI_DATATYPE_NULL;
  /// The node and rail communicators of the two-level wires, and the order of their steps.
  NodeComms* node = nullptr;
  MPI_Comm phased_comm = MPI_COMM_NULL;
  int tag_base = 0;
};

/// What a wire's check() may depend on beside its buffers.
struct WireSetup {
  int ranks = 1;
  /// Empty with a progress thread; else why the driver runs inline (e.g. "options.force_inline").
  std::string inline_reason;
  /// "" when the nodes are of equal size (NodeComms::unequal): a two-level wire refuses others.
  std::string unequal_nodes;
};

class Wire {
 public:
  virtual ~Wire() = default;
  /// This rank's verdict on the caller's buffers ("" if fine; "group g: ..." otherwise).
  virtual std::string check(int g, const WireSetup& setup) const = 0;
  /// Items a rank submits per exchange (pairs; 0 for a wire that sends no counted items).
  virtual std::size_t k() const noexcept = 0;
  /// The wire's other size that every rank must agree on beside k (0 if none): a group
  /// exchanged by different collectives on different ranks must never be posted.
  virtual std::uint64_t extent() const noexcept = 0;
  /// The most elements the wire passes to one MPI call where it splits its collective over
  /// several (max_post_count() when it was made; 0 if it never splits): every rank must
  /// split alike, or their posts would not match.
  virtual std::uint64_t post_limit() const noexcept { return 0; }
  /// Variable-count mode: whether the counts are exchanged before the data.
  virtual bool exchanges_counts() const noexcept = 0;
  /// Whether the exchange must run on host buffers (staged when they are on the device,
  /// GPU-aware MPI or not).
  virtual bool host_only() const noexcept { return false; }
  /// At set-up, on every rank in group order (collective over the phased communicator for a
  /// wire that uses it): host mirrors when the buffers are on the device and MPI is not
  /// GPU-aware.
  virtual void init(const WireContext& ctx, bool staging, int ranks) = 0;
  /// [S] submit(): this rank's `count` items to the host mirror (staging only).
  virtual void stage_out(const CopyFunction& to_host, std::size_t count) noexcept = 0;
  /// [O] after completion: what arrived back to the device (staging only).
  virtual void stage_in(const CopyFunction& to_device, const GroupState& s) noexcept = 0;
  /// [P] posts the group's data collective; returns MPI's code.
  virtual int post(const WireContext& ctx, const GroupState& s, MPI_Request* req) noexcept = 0;
  /// Tags the wire's messages use on the phased communicator (WireContext::tag_base): 0 for
  /// a wire that does not use it.
  virtual int tags() const noexcept { return 0; }
  /// A phased wire runs its exchange as several steps on the phased communicator: post()
  /// starts it and leaves *req null, and the driver calls advance() on every pass, beside
  /// MPI_Testsome, until it is done. Other wires complete their one request.
  virtual bool phased() const noexcept { return false; }
  /// A wire whose post() blocks until the exchange is done (a blocking MPI_Allreduce): the
  /// driver notes the group while it blocks, so that the watchdog can name it.
  virtual bool blocks() const noexcept { return false; }
  /// [P] phased wires: advances without blocking. MPI_SUCCESS (done says whether the
  /// exchange is complete; then s.total is set), or an error code: the exchange failed.
  virtual int advance(GroupState& /*s*/, bool& done) noexcept {
    done = true;
    return MPI_SUCCESS;
  }
  /// Bytes of the exchange just completed: this rank's contribution, and what it received.
  virtual std::uint64_t bytes_sent(const GroupState& s) const noexcept = 0;
  virtual std::uint64_t bytes_received(const GroupState& s) const noexcept = 0;
  /// A sparse allreduce's pairs this rank sent in the exchange just completed, and their
  /// bytes (GroupStats::pairs_sent); 0 for the other wires.
  virtual std::uint64_t pairs_sent(const GroupState& /*s*/) const noexcept { return 0; }
  virtual std::uint64_t pair_bytes_sent(const GroupState& /*s*/) const noexcept { return 0; }
  /// [O] after completion: the pairs the exchange gave back to this rank
  /// (ProgressEngine::dropped_total); 0 for a wire that gives none back.
  virtual std::size_t dropped() const noexcept { return 0; }
};

/// The most elements one MPI call of a wire that splits its collective passes (the dense
/// allreduce's; docs/comm.md, "Large counts"): unlimited where MPI has the large-count calls
/// (MPI 4: MPI_Iallreduce_c), else INT_MAX. For tests, lower: set_max_post_count(), or the
/// environment's OMGS_MAX_POST_COUNT, so that the split runs on small buffers. Read when a
/// wire is made (every rank must have the same; the engine checks). Throws omgs::Error for an
/// OMGS_MAX_POST_COUNT that is not a whole number >= 1.
OMGS_EXPORT std::uint64_t max_post_count();
/// For tests: the limit of wires made from now on (0: the default, as above).
OMGS_EXPORT void set_max_post_count(std::uint64_t limit) noexcept;

/// The sets of GroupBuffers fields a wire reads.
enum WireFields : unsigned {
  pair_fields = 1,              // send, recv, k
  dense_fields = 2,             // dense_send, dense_recv, dense_numel, blocking_allreduce
  sparse_allreduce_fields = 4,  // sparse_numel, dropped, pair_wire
  dense16_fields = 8,           // dense16_send, dense16_recv, dense_wire, dense16_error
  sparse_node_fields = 16,      // node_residual
};
/// For a wire's factory: throws omgs::Error naming the first field of `b` outside `used`
/// that is not at its default (buffers that contradict their kind).
OMGS_EXPORT void refuse_stray_fields(const GroupBuffers& b, unsigned used);

/// The pairs of every rank gathered on every rank (MPI_Iallgatherv of SparsePair): send,
/// recv and k of `b`.
OMGS_EXPORT std::unique_ptr<Wire> allgatherv_pairs_wire(const GroupBuffers& b);
/// The floats of every rank summed on every rank (MPI_SUM): the dense_* buffers of `b`, by
/// MPI_Iallreduce, or by a blocking MPI_Allreduce in post() (b.blocking_allreduce: then it
/// is a phased wire done when post() returns).
OMGS_EXPORT std::unique_ptr<Wire> allreduce_sum_wire(const GroupBuffers& b);
/// The mean of every rank's 16-bit values on every rank (WireKind::allreduce_mean16,
/// wire_allreduce16.cpp): dense16_send, dense16_recv, dense_numel, dense_wire and
/// blocking_allreduce of `b`; a phased wire, point to point on the phased communicator (two tags).
OMGS_EXPORT std::unique_ptr<Wire> allreduce_mean16_wire(const GroupBuffers& b);
/// The sparse allreduce of every rank's pairs (SparseAllreduce, phased): send, recv,
/// dropped, k and sparse_numel of `b`.
OMGS_EXPORT std::unique_ptr<Wire> sparse_allreduce_wire(const GroupBuffers& b);

/// The floats of every rank summed on every rank in two levels (WireKind::allreduce_node,
/// phased): reduce-scatter inside the node, allreduce of the shard on the rail, allgather
/// inside the node; the dense_* buffers of `b`.
OMGS_EXPORT std::unique_ptr<Wire> allreduce_node_wire(const GroupBuffers& b);
/// The sparse node-summed exchange (WireKind::sparse_node, phased): reduce-scatter inside the
/// node, error feedback and top-k of the shard on the host, allgather of the shard's pairs on
/// the rail, the summed shards shared inside the node; dense_*, k and node_residual of `b`.
OMGS_EXPORT std::unique_ptr<Wire> sparse_node_wire(const GroupBuffers& b);

/// Makes the wire of a GroupBuffers of its kind; throws omgs::Error where the buffers'
/// fields contradict the kind (stray_fields).
using WireFactory = std::function<std::unique_ptr<Wire>(const GroupBuffers&)>;
/// The registration: `kind`'s wire from now on, and its name for to_string(WireKind) and
/// error messages ("wire <value>" if empty). The built-in kinds are registered at the first
/// use; registering a kind again replaces its factory and name. Thread-safe; engines set up
/// after it use it.
OMGS_EXPORT void register_wire(WireKind kind, WireFactory factory, std::string name = {});
/// The wire that a GroupBuffers describes, by its kind; throws omgs::Error for a kind that
/// nothing registered or buffers that contradict it.
OMGS_EXPORT std::unique_ptr<Wire> make_wire(const GroupBuffers& b);

}  // namespace omgs::detail
