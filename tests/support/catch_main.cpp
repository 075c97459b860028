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
    failed = Catch::Session().run(argc, argv);
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
