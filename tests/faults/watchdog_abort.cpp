// Rank 1 never calls ready(); rank 0's finish() times out after 0.5 s and, with
// on_timeout = abort, prints the watchdog's report and aborts the job (MPI_Abort) instead
// of waiting forever. CTest checks the report (the exit status is MPI_Abort's).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <omgs/runtime.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Kokkos::initialize(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    omgs::RuntimeOptions opt;
    opt.planner = omgs::Planner::single;
    opt.perf_model = "calibrate";
    opt.wait_timeout_s = 0.5;
    opt.on_timeout = omgs::TimeoutAction::abort;
    omgs::Runtime rt(MPI_COMM_WORLD, {{"a", 100, 1e-4}, {"b", 50, 1e-4}}, opt);
    if (rank == 0) {
      rt.ready(1);
      rt.ready(0);
      rt.finish();  // does not return
      std::printf("error: finish() returned\n");
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // stuck; killed by the abort
    }
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 1;
}
