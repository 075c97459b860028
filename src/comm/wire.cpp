// The registry of the wires (wire.hpp): which wire a caller's GroupBuffers asks for, by its
// kind. The built-in kinds register here; another collective registers its own kind with
// register_wire() from its own files.
#include "comm/wire.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "comm/environment.hpp"

namespace omgs::detail {

namespace {

struct WireEntry {
  WireFactory make;
  const char* name = nullptr;  // into WireRegistry::names
};

struct WireRegistry {
  std::mutex mutex;
  std::map<int, WireEntry> entries;
  std::deque<std::string> names;  // never shrinks: to_string's pointers stay valid
  WireRegistry() {
    add(WireKind::allgather_pairs, allgatherv_pairs_wire, "allgather_pairs");
    add(WireKind::allreduce_sum, allreduce_sum_wire, "allreduce_sum");
    add(WireKind::sparse_allreduce, sparse_allreduce_wire, "sparse_allreduce");
    add(WireKind::allreduce_node, allreduce_node_wire, "allreduce_node");
    add(WireKind::allreduce_mean16, allreduce_mean16_wire, "allreduce_mean16");
    add(WireKind::sparse_node, sparse_node_wire, "sparse_node");
  }
  void add(WireKind kind, WireFactory factory, std::string name) {
    if (name.empty()) name = "wire " + std::to_string(static_cast<int>(kind));
    names.push_back(std::move(name));
    entries[static_cast<int>(kind)] = {std::move(factory), names.back().c_str()};
  }
};

WireRegistry& registry() {
  static WireRegistry r;
  return r;
}

/// "" if `b` leaves every field outside `used` at its default, else the first set field.
std::string stray_fields(const GroupBuffers& b, unsigned used) {
  const GroupBuffers none;
  if (!(used & pair_fields)) {
    if (b.send != nullptr || b.recv != nullptr) return "send / recv (a pair group's buffers)";
    if (b.k != 0) return "k = " + std::to_string(b.k) + " (a pair group's size)";
  }
  if (!(used & dense_fields)) {
    if (b.dense_send != nullptr || b.dense_recv != nullptr)
      return "dense_send / dense_recv (a dense group's buffers)";
    if (b.dense_numel != 0) return "dense_numel = " + std::to_string(b.dense_numel);
    if (b.blocking_allreduce) return "blocking_allreduce (a dense group's form)";
  }
  if (!(used & dense16_fields)) {
    if (b.dense16_send != nullptr || b.dense16_recv != nullptr)
      return "dense16_send / dense16_recv (a 16-bit dense group's buffers)";
    if (b.dense_wire != none.dense_wire) return "dense_wire (a 16-bit dense group's format)";
    if (b.dense16_error != nullptr) return "dense16_error (a 16-bit dense group's buffer)";
  }
  if (!(used & sparse_allreduce_fields)) {
    if (b.sparse_numel != 0) return "sparse_numel = " + std::to_string(b.sparse_numel);
    if (b.dropped != nullptr) return "dropped (a sparse-allreduce group's buffer)";
    if (b.pair_wire != none.pair_wire) return "pair_wire (a sparse-allreduce group's format)";
  }
  if (!(used & sparse_node_fields) && b.node_residual != nullptr)
    return "node_residual (a sparse node-summed group's buffer)";
  return "";
}

std::atomic<std::uint64_t> g_max_post_count{0};  // 0: the default

}  // namespace

std::uint64_t max_post_count() {
#if MPI_VERSION >= 4
  const std::uint64_t most = UINT64_MAX;  // the large-count calls take an MPI_Count
#else
  const std::uint64_t most = INT_MAX;
#endif
  const std::uint64_t set = g_max_post_count.load(std::memory_order_relaxed);
  if (set != 0) return std::min(set, most);
  if (const char* v = env_value("OMGS_MAX_POST_COUNT")) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x == 0 || v[0] == '-')
      throw Error(std::string("omgs: OMGS_MAX_POST_COUNT='") + v +
                  "' is not a whole number >= 1 (a test's per-post count limit)");
    return std::min<std::uint64_t>(x, most);
  }
  return most;
}

void set_max_post_count(std::uint64_t limit) noexcept {
  g_max_post_count.store(limit, std::memory_order_relaxed);
}

void refuse_stray_fields(const GroupBuffers& b, unsigned used) {
  const std::string stray = stray_fields(b, used);
  if (!stray.empty())
    throw Error(std::string("GroupBuffers::kind is ") + to_string(b.kind) + " but " + stray +
                " is set");
}

void register_wire(WireKind kind, WireFactory factory, std::string name) {
  WireRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.add(kind, std::move(factory), std::move(name));
}

std::unique_ptr<Wire> make_wire(const GroupBuffers& b) {
  WireFactory factory;
  {
    WireRegistry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.entries.find(static_cast<int>(b.kind));
    if (it != r.entries.end()) factory = it->second.make;
  }
  if (!factory)
    throw Error("GroupBuffers::kind " + std::to_string(static_cast<int>(b.kind)) +
                " has no registered wire");
  return factory(b);
}

}  // namespace omgs::detail

namespace omgs {

const char* to_string(WireKind kind) {
  detail::WireRegistry& r = detail::registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.entries.find(static_cast<int>(kind));
  return it == r.entries.end() ? "unregistered" : it->second.name;
}

}  // namespace omgs
