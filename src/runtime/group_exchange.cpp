// The registry of the group exchanges (group_exchange.hpp), keyed by the plan's Collective,
// and what the exchanges share. The built-in collectives register here; another collective
// registers its exchange with register_exchange() from its own files.
#include "runtime/group_exchange.hpp"

#include <map>
#include <mutex>

#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/dense_kernels.hpp"

namespace omgs::detail {

namespace {

struct ExchangeEntry {
  ExchangeFactory make;
  ExchangeFootprint footprint;
};

struct ExchangeRegistry {
  std::mutex mutex;
  std::map<int, ExchangeEntry> entries;
  ExchangeRegistry() {
    entries[static_cast<int>(Collective::sparse)] = {
        make_allgather_exchange,
        [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats& f) {
          return allgather_footprint(n, k, ranks, f.pair);
        }};
    entries[static_cast<int>(Collective::dense)] = {
        [](GroupSlice slice, double /*density*/, ExchangeContext& ctx) {
          return make_allreduce_exchange(std::move(slice), ctx);
        },
        [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats& f) {
          return allreduce_footprint(n, k, ranks, f.dense);
        }};
    entries[static_cast<int>(Collective::sparse_allreduce)] = {
        make_sparse_allreduce_exchange,
        [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats& f) {
          return sparse_allreduce_footprint(n, k, ranks, f.pair);
        }};
    entries[static_cast<int>(Collective::allreduce_node)] = {
        [](GroupSlice slice, double /*density*/, ExchangeContext& ctx) {
          return make_allreduce_node_exchange(std::move(slice), ctx);
        },
        [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats&) {
          return allreduce_footprint(n, k, ranks);  // the two-level wire is fp32
        }};
    entries[static_cast<int>(Collective::sparse_node)] = {
        make_sparse_node_exchange,
        [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const WireFormats&) {
          return sparse_node_footprint(n, k, ranks);
        }};
  }
};

ExchangeRegistry& registry() {
  static ExchangeRegistry r;
  return r;
}

/// The entry of `collective` (empty functions if none is registered).
ExchangeEntry entry_of(Collective collective) {
  ExchangeRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.entries.find(static_cast<int>(collective));
  return it == r.entries.end() ? ExchangeEntry{} : it->second;
}

}  // namespace

void register_exchange(Collective collective, ExchangeFactory factory,
                       ExchangeFootprint footprint) {
  ExchangeRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.entries[static_cast<int>(collective)] = {std::move(factory), std::move(footprint)};
}

std::unique_ptr<GroupExchange> make_exchange(Collective collective, GroupSlice slice,
                                             double density, ExchangeContext& ctx) {
  const ExchangeEntry e = entry_of(collective);
  if (!e.make)
    throw Error("omgs: " + slice.label + " has an unknown collective (" +
                std::to_string(static_cast<int>(collective)) + ")");
  return e.make(std::move(slice), density, ctx);
}

std::uint64_t exchange_footprint(Collective collective, std::uint64_t n, std::uint64_t k,
                                 std::uint64_t ranks, const WireFormats& formats) {
  const ExchangeEntry e = entry_of(collective);
  // make_exchange() names the group whose collective is unknown.
  return e.footprint ? e.footprint(n, k, ranks, formats) : 0;
}

void GroupExchange::zero_aggregate() const {
  fill_zero(exec(), Kokkos::subview(flat().agg, range()));
}

void GroupExchange::keep_gradient_in_residual(WaitStatus w, int bad, GroupReport& r,
                                              const std::string& exchange,
                                              const std::string& sum) const {
  IterationStats& st = r.stats;
  FlatBuffers& f = flat();
  const std::size_t off = slice_.offset, n = slice_.numel;
  const int own_bad =
      kernels::count_nonfinite(exec(), f.grad, off, n, ctx_.bad_blocks, ctx_.bad_blocks_host);
  if (own_bad == 0) kernels::add_into(exec(), ctx_.resid_of(slice_.g), f.grad, off, n);
  st.nonfinite += static_cast<std::uint64_t>(own_bad);
  zero_aggregate();
  if (st.status != Status::ok) return;
  st.failed_group = static_cast<int>(slice_.g);
  if (w != WaitStatus::ok) {
    st.status = Status::comm_failed;
    r.error = "omgs: finish(): " + exchange + " " + slice_.label + " " + collective_failure(w) +
              "; this rank's gradient was kept in its residual";
    return;
  }
  st.status = Status::nonfinite_gradient;
  r.error = "omgs: " + sum + " " + slice_.label + " summed to " + std::to_string(bad) +
            " non-finite values (this rank's gradient has " + std::to_string(own_bad) +
            "); the step is skipped for it on every rank";
}

std::string collective_failure(WaitStatus w) {
  return w == WaitStatus::failed ? "completed with an MPI error; this rank's communicator is no "
                                   "longer usable and every later group fails"
                                 : "was never submitted";
}

void count_pairs(IterationStats& st, std::uint64_t pairs, std::uint64_t bytes) {
  if (pairs == 0) return;
  const double before = static_cast<double>(st.pairs_sent);
  st.pairs_sent += pairs;
  st.bytes_per_pair = (st.bytes_per_pair * before + static_cast<double>(bytes)) /
                      static_cast<double>(st.pairs_sent);
}

}  // namespace omgs::detail
