// A downstream program, built against an installed omgs (CMake package or pkg-config):
// every rank plans the bundled ResNet-50 and the ranks check that they agree.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <omgs/omgs.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
      std::fprintf(stderr, "usage: %s MODEL.csv\n", argv[0]);
      rc = 2;
    } else {
      try {
        const auto layers = omgs::load_model_csv(argv[1]);
        const omgs::ReferenceModel model;
        const omgs::Plan plan = omgs::make_plan(omgs::Planner::mgs, layers, model, {16, 0.001});
        long groups = static_cast<long>(plan.groups.size()), lo = 0, hi = 0;
        MPI_Allreduce(&groups, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&groups, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
        std::printf("omgs consumer: rank %d of %d planned %zu tensors into %ld groups\n", rank,
                    size, layers.size(), groups);
        if (lo != hi || groups < 1) rc = 1;
      } catch (const omgs::Error& e) {
        std::fprintf(stderr, "omgs consumer: %s\n", e.what());
        rc = 1;
      }
    }
  }
  MPI_Finalize();
  return rc;
}
