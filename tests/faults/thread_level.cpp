// MPI initialized with MPI_THREAD_SINGLE: the runtime has no progress thread (inline
// mode, driven from finish()), says so, and still communicates correctly.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include <omgs/runtime.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  Kokkos::initialize(argc, argv);
  int rank = 0, size = 1, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    omgs::RuntimeOptions opt;
    opt.density = 1.0;
    opt.perf_model = "calibrate";
    omgs::Runtime rt(MPI_COMM_WORLD, {{"a", 1000, 1e-4}, {"b", 10, 1e-5}}, opt);
    const omgs::ProgressStats ps = rt.progress_stats();
    if (ps.mode != omgs::ProgressMode::inline_) ++failures;
    if (rank == 0)
      std::printf("progress: %s (%s)\n", omgs::to_string(ps.mode), ps.pin_note.c_str());
    for (std::size_t l = 2; l-- > 0;) {
      Kokkos::deep_copy(rt.gradient(l), static_cast<float>(rank + 1));
      if (rt.ready(l) != omgs::Status::ok) ++failures;
    }
    if (rt.finish().status != omgs::Status::ok) ++failures;
    const float mean = static_cast<float>(size + 1) / 2.0f;
    auto a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rt.aggregated(0));
    for (std::size_t i = 0; i < a.extent(0); ++i)
      if (std::fabs(a(i) - mean) > 1e-5f) ++failures;
  }
  int any = 0;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  Kokkos::finalize();
  if (rank == 0) std::printf(any ? "thread level test FAILED\n" : "thread level test passed\n");
  MPI_Finalize();
  return any ? 1 : 0;
}
