// The registration of the group exchanges (group_exchange.hpp) and what they share. A new
// collective adds its exchange file and one case in each switch here.
#include "runtime/group_exchange.hpp"

#include <omgs/detail/kokkos_helpers.hpp>

namespace omgs::detail {

std::unique_ptr<GroupExchange> make_exchange(Collective collective, GroupSlice slice,
                                             double density, ExchangeContext& ctx) {
  switch (collective) {
    case Collective::sparse:
      return make_allgather_exchange(std::move(slice), density, ctx);
    case Collective::dense:
      return make_allreduce_exchange(std::move(slice), ctx);
    case Collective::sparse_allreduce:
      return make_sparse_allreduce_exchange(std::move(slice), density, ctx);
  }
  throw Error("omgs: " + slice.label + " has an unknown collective (" +
              std::to_string(static_cast<int>(collective)) + ")");
}

std::uint64_t exchange_footprint(Collective collective, std::uint64_t n, std::uint64_t k,
                                 std::uint64_t ranks, PairWire wire) {
  switch (collective) {
    case Collective::sparse:
      return allgather_footprint(n, k, ranks, wire);
    case Collective::dense:
      return allreduce_footprint(n, k, ranks);
    case Collective::sparse_allreduce:
      return sparse_allreduce_footprint(n, k, ranks, wire);
  }
  return 0;  // make_exchange() names the group whose collective is unknown
}

void GroupExchange::zero_aggregate() const {
  fill_zero(exec(), Kokkos::subview(flat().agg, range()));
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
