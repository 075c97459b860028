// GroupBuffers::kind and the registry of wires (src/comm/wire.cpp): buffers whose fields
// contradict their kind, and a kind nothing registered, are refused at set-up on every rank
// (rebind included) with an omgs::Error naming the group and the field; a kind registered
// by the caller (register_wire) is posted like the built-in ones. 1 and 2 ranks.
#include <mpi.h>

#include <string>
#include <vector>

#include <omgs/comm.hpp>

#include "comm/wire.hpp"
#include "comm_test_data.hpp"
#include "omgs_catch.hpp"

using omgs::GroupBuffers;
using omgs::WireKind;
using omgs_test_comm::world_rank;
using omgs_test_comm::world_size;

namespace {

omgs::ProgressOptions quiet() {
  omgs::ProgressOptions o;
  o.read_environment = false;
  return o;
}

/// The message of the error the engine's construction throws on this rank ("" if none).
std::string setup_error(const std::vector<GroupBuffers>& groups,
                        omgs::ProgressOptions o = quiet()) {
  try {
    omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
  } catch (const omgs::Error& err) {
    return err.what();
  }
  return "";
}

}  // namespace

TEST_CASE("buffers that contradict their kind are refused on every rank", "[comm][wire_kind]") {
  omgs::SparsePair pairs[64];
  std::vector<float> x(16);
  GroupBuffers ok{pairs, pairs + 4, 4};

  GroupBuffers dense_as_pairs = ok;  // kind left at allgather_pairs
  dense_as_pairs.dense_numel = 16;
  std::string e = setup_error({ok, dense_as_pairs});
  CHECK_THAT(e, Catch::Contains("group 1: GroupBuffers::kind is allgather_pairs but "
                                "dense_numel = 16 is set"));

  GroupBuffers pairs_as_dense;
  pairs_as_dense.kind = WireKind::allreduce_sum;
  pairs_as_dense.dense_send = x.data();
  pairs_as_dense.dense_recv = x.data();
  pairs_as_dense.dense_numel = x.size();
  pairs_as_dense.send = pairs;
  e = setup_error({pairs_as_dense});
  CHECK_THAT(e, Catch::Contains("group 0: GroupBuffers::kind is allreduce_sum but send / recv"));

  GroupBuffers sparse_with_dense{pairs, pairs + 4, 4};
  sparse_with_dense.kind = WireKind::sparse_allreduce;
  sparse_with_dense.sparse_numel = 100;
  sparse_with_dense.dropped = pairs + 8;
  sparse_with_dense.blocking_allreduce = true;
  e = setup_error({sparse_with_dense});
  CHECK_THAT(e, Catch::Contains("kind is sparse_allreduce but blocking_allreduce"));

  GroupBuffers unknown = ok;
  unknown.kind = WireKind{41};
  e = setup_error({ok, ok, unknown});
  CHECK_THAT(e, Catch::Contains("group 2: GroupBuffers::kind 41 has no registered wire"));
}

TEST_CASE("one rank's contradicting buffers make every rank throw, naming it",
          "[comm][wire_kind]") {
  const int P = world_size(), me = world_rank();
  omgs::SparsePair pairs[64];
  GroupBuffers g{pairs, pairs + 4, 4};
  if (me == P - 1) g.sparse_numel = 7;  // stray: an allgather group reads no sparse_numel
  // The rank with the stray field names it; the others name that rank.
  const std::string names = me == P - 1 ? "sparse_numel = 7" : "rank " + std::to_string(P - 1);
  CHECK_THAT(setup_error({g}), Catch::Contains(names));
  // rebind() refuses them the same way, and the engine keeps its groups.
  omgs::ProgressEngine engine(MPI_COMM_WORLD, {GroupBuffers{pairs, pairs + 4, 4}}, quiet());
  CHECK_THROWS_WITH(engine.rebind({g}), Catch::Contains(names));
  CHECK(engine.num_groups() == 1);
  REQUIRE(engine.submit(0) == omgs::SubmitStatus::ok);
  CHECK(engine.wait(0, 60) == omgs::WaitStatus::ok);
}

TEST_CASE("a blocking dense group needs the progress thread", "[comm][wire_kind]") {
  std::vector<float> x(8);
  GroupBuffers d;
  d.kind = WireKind::allreduce_sum;
  d.dense_send = x.data();
  d.dense_recv = x.data();
  d.dense_numel = x.size();
  d.blocking_allreduce = true;
  omgs::ProgressOptions o = quiet();
  o.force_inline = true;
  CHECK_THAT(setup_error({d}, o),
             Catch::Contains("group 0: blocking_allreduce needs the progress thread") &&
                 Catch::Contains("options.force_inline"));
}

TEST_CASE("a kind registered by the caller is posted like the built-in ones", "[comm][wire_kind]") {
  const int P = world_size(), me = world_rank();
  // The pairs' wire under a kind of its own: what the registry adds is the dispatch.
  const WireKind mine = WireKind{42};
  CHECK(std::string(omgs::to_string(mine)) == "unregistered");
  omgs::detail::register_wire(
      mine,
      [](const GroupBuffers& b) {
        GroupBuffers as_pairs = b;
        as_pairs.kind = WireKind::allgather_pairs;
        return omgs::detail::allgatherv_pairs_wire(as_pairs);
      },
      "pairs_again");
  // Its name is the registry's, as the built-in ones' are.
  CHECK(std::string(omgs::to_string(mine)) == "pairs_again");
  CHECK(std::string(omgs::to_string(WireKind::sparse_allreduce)) == "sparse_allreduce");
  const std::size_t k = 3;
  std::vector<omgs::SparsePair> send(k), recv(k * static_cast<std::size_t>(P));
  for (std::size_t i = 0; i < k; ++i)
    send[i] = {static_cast<std::uint32_t>(me * 10 + static_cast<int>(i)), float(me) + 0.5f};
  GroupBuffers g{send.data(), recv.data(), k};
  g.kind = mine;
  omgs::ProgressEngine e(MPI_COMM_WORLD, {g}, quiet());
  REQUIRE(e.submit(0) == omgs::SubmitStatus::ok);
  REQUIRE(e.wait(0, 60) == omgs::WaitStatus::ok);
  for (int r = 0; r < P; ++r)
    for (std::size_t i = 0; i < k; ++i) {
      const omgs::SparsePair& p = recv[static_cast<std::size_t>(r) * k + i];
      CHECK(p.index == static_cast<std::uint32_t>(r * 10 + static_cast<int>(i)));
      CHECK(p.value == float(r) + 0.5f);
    }
  // A rank whose group is of another kind is refused, not posted against it.
  if (P > 1) {
    GroupBuffers other = g;
    if (me == 0) other.kind = WireKind::allgather_pairs;
    CHECK_THAT(setup_error({other}), Catch::Contains("ranks disagree on the collective"));
  }
}
