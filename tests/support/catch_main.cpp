// The main() of every omgs test program. With OMGS_TEST_WITH_MPI it initializes MPI
// (MPI_THREAD_MULTIPLE requested) and Kokkos, and makes every rank return the same
// status: the test fails if it failed on any rank. With OMGS_TEST_WITHOUT_KOKKOS (the
// plan and queue tests) it needs neither MPI nor Kokkos.
#if OMGS_CATCH2_MAJOR >= 3
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#ifndef OMGS_TEST_WITHOUT_KOKKOS
#include <Kokkos_Core.hpp>
#endif

#ifdef OMGS_TEST_WITH_MPI
#include <mpi.h>
#endif

#include <cstdio>
#include <cstring>

#ifndef OMGS_TEST_WITHOUT_KOKKOS
namespace {
/// Prints the backend the program runs on, so that CTest's log says where the runtime and
/// the other Kokkos code ran, and fails (1) where it is not OMGS_TEST_DEFAULT_BACKEND, the
/// backend that tests/CMakeLists.txt named the tests after.
int report_backend(int rank) {
  const Kokkos::DefaultExecutionSpace exec;
  const char* name = exec.name();
  if (rank == 0) {
    std::printf("omgs test: Kokkos %d.%d.%d, default execution space %s (concurrency %d)\n",
                KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100, name,
                exec.concurrency());
    std::fflush(stdout);
  }
#ifdef OMGS_TEST_DEFAULT_BACKEND
  if (std::strcmp(name, OMGS_TEST_DEFAULT_BACKEND) != 0) {
    std::fprintf(stderr, "omgs test: named after backend %s but Kokkos' default is %s\n",
                 OMGS_TEST_DEFAULT_BACKEND, name);
    return 1;
  }
#endif
  return 0;
}
}  // namespace
#endif

int main(int argc, char** argv) {
#ifdef OMGS_TEST_WITH_MPI
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
#endif
  int failed = 0;
#ifdef OMGS_TEST_WITHOUT_KOKKOS
  failed = Catch::Session().run(argc, argv);
#else
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int rank = 0;
#ifdef OMGS_TEST_WITH_MPI
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    failed = report_backend(rank);
    if (failed == 0) failed = Catch::Session().run(argc, argv);
  }
#endif
#ifdef OMGS_TEST_WITH_MPI
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  failed = any_failed;
#endif
  return failed != 0 ? 1 : 0;
}
