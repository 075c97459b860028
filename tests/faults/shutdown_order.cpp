// The user's shutdown order, on every rank (argv[1]):
//   mpi-first     MPI_Finalize, then the Runtime is destroyed, then Kokkos::finalize
//   kokkos-first  Kokkos::finalize, MPI_Finalize, then the Runtime is destroyed
//   absent        the last rank never constructs the Runtime: the others must throw
//                 within OMGS_TIMEOUT_S (set by CTest) instead of waiting forever
//   stuck         rank 0 submits its group, rank 1 never does: destroying rank 0's Runtime
//                 gives up after OMGS_SHUTDOWN_TIMEOUT_S (set by CTest) with a message
// CTest checks the messages; the exit status must be 0 except in 'absent' (MPI_Abort).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include <omgs/runtime.hpp>

namespace {

std::unique_ptr<omgs::Runtime> make_runtime() {
  omgs::RuntimeOptions opt;
  opt.planner = omgs::Planner::single;
  opt.perf_model = "reference";
  return std::make_unique<omgs::Runtime>(
      MPI_COMM_WORLD, std::vector<omgs::LayerSpec>{{"a", 100, 1e-4}, {"b", 50, 1e-4}}, opt);
}

void one_iteration(omgs::Runtime& rt) {
  rt.begin_backward();
  rt.ready(1);
  rt.ready(0);
  const omgs::IterationStats st = rt.finish();
  if (st.status != omgs::Status::ok) std::printf("error: iteration failed\n");
}

int absent(int rank, int size) {
  if (rank == size - 1) {
    // Failed before constructing: waits (in MPI_Finalize the job would also end), killed by
    // the others' MPI_Abort.
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto rt = make_runtime();
    std::printf("error: rank %d constructed the runtime without rank %d\n", rank, size - 1);
  } catch (const omgs::Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d: %s\n", rank, e.what());
    if (s < 10.0) std::printf("construction bound test passed (%.1f s)\n", s);
    std::fflush(stdout);
  }
  MPI_Abort(MPI_COMM_WORLD, 3);
  return 1;
}

int stuck(int rank) {
  auto rt = make_runtime();
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == 0) {
    rt->begin_backward();
    rt->ready(1);
    rt->ready(0);  // the group is posted; rank 1 never posts it
  }
  rt.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0 && s < 10.0) std::printf("shutdown bound test passed (%.1f s)\n", s);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Kokkos::initialize(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "absent") == 0) return absent(rank, size);
  if (std::strcmp(mode, "stuck") == 0) return stuck(rank);
  auto rt = make_runtime();
  one_iteration(*rt);
  if (std::strcmp(mode, "kokkos-first") == 0) {
    Kokkos::finalize();
    MPI_Finalize();
    rt.reset();
  } else {
    MPI_Finalize();
    // Calls after MPI_Finalize make no MPI call: they fail with a message.
    if (rt->ready(0) != omgs::Status::comm_failed ||
        rt->finish().status != omgs::Status::comm_failed ||
        rt->last_error().find("MPI_Finalize was called") == std::string::npos) {
      std::printf("error: a call after MPI_Finalize did not fail with a message\n");
      return 1;
    }
    rt.reset();
    Kokkos::finalize();
  }
  std::printf("shutdown order test passed (%s)\n", mode);
  return 0;
}
