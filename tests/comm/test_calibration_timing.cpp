// The timing loops calibration uses (comm/collectives.hpp): the idle barrier holds every rank
// until the last arrives, the idle wait completes a collective with its result, and the
// timed allgather and allreduce return one duration per repetition in every form.
#include <mpi.h>

#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include <omgs/allreduce_form.hpp>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"
#include "mpi_world.hpp"
#include "omgs_catch.hpp"

using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

omgs::IdleOptions sleeping_idle() {
  omgs::IdleOptions idle;
  idle.spin_iterations = 0;
  idle.yield_iterations = 0;
  return idle;
}

}  // namespace

TEST_CASE("the idle barrier holds every rank until the last arrives", "[comm][calibration]") {
  const int rank = world_rank();
  const double late_s = 0.1;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = omgs::detail::now_s();
  if (rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  omgs::detail::barrier_as_progress_thread(MPI_COMM_WORLD, sleeping_idle());
  const double waited = omgs::detail::now_s() - t0;
  CHECK(waited >= 0.8 * late_s);
  // Busy (the other waiting): the same.
  MPI_Barrier(MPI_COMM_WORLD);
  omgs::IdleOptions busy;
  busy.spin_iterations = std::numeric_limits<int>::max();
  const double t1 = omgs::detail::now_s();
  if (rank == world_size() - 1) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  omgs::detail::barrier_as_progress_thread(MPI_COMM_WORLD, busy);
  CHECK(omgs::detail::now_s() - t1 >= 0.8 * late_s);
}

TEST_CASE("the idle wait completes a collective with its result", "[comm][calibration]") {
  const int rank = world_rank(), size = world_size();
  std::vector<int> in(1000, rank + 1), out(1000, 0);
  MPI_Request req;
  MPI_Iallreduce(in.data(), out.data(), 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  omgs::detail::wait_as_progress_thread(req, sleeping_idle());
  CHECK(req == MPI_REQUEST_NULL);
  for (int v : out) REQUIRE(v == size * (size + 1) / 2);
}

TEST_CASE("progress_idle waits as MPI_Wait does or as an oversubscribed progress thread",
          "[comm][calibration]") {
  const omgs::IdleOptions idle = omgs::detail::progress_idle(MPI_COMM_WORLD, 1);
  const bool busy = idle.spin_iterations == std::numeric_limits<int>::max();
  // Either MPI_Wait's busy poll or the oversubscribed progress thread's (sleeps at once).
  CHECK((busy || (idle.spin_iterations == 0 && idle.yield_iterations == 0)));
  CHECK(idle.sleep_s > 0);
}

TEST_CASE("the timed collectives give one duration per repetition", "[comm][calibration]") {
  const omgs::IdleOptions idle = sleeping_idle();
  const std::vector<double> ag = omgs::detail::time_allgather(MPI_COMM_WORLD, 4096, 3, idle);
  REQUIRE(ag.size() == 3);
  for (double t : ag) CHECK(t > 0);
  for (omgs::AllreduceForm form :
       {omgs::AllreduceForm::nonblocking, omgs::AllreduceForm::nonblocking_in_place,
        omgs::AllreduceForm::blocking}) {
    const std::vector<double> ar =
        omgs::detail::time_allreduce_form(MPI_COMM_WORLD, 1024, 2, form, idle);
    REQUIRE(ar.size() == 2);
    for (double t : ar) CHECK(t > 0);
  }
}
