// The user's shutdown order, on every rank (argv[1]):
//   mpi-first     MPI_Finalize, then the Runtime is destroyed, then Kokkos::finalize
//   kokkos-first  Kokkos::finalize, MPI_Finalize, then the Runtime is destroyed
//   absent R,...  ranks R,... (ascending) never construct the Runtime (they wait in a
//                 collective the others have not reached): the others must throw within
//                 2 x OMGS_TIMEOUT_S (set by CTest) naming them, instead of waiting forever
//   stuck         rank 0 submits its group, rank 1 never does: destroying rank 0's Runtime
//                 gives up after OMGS_SHUTDOWN_TIMEOUT_S (set by CTest) with a message
//   die           the last rank dies after one iteration (mpiexec --enable-recovery keeps
//                 the others running): they report it within the bounds, then MPI_Abort
// mpi-first and kokkos-first take "inline" as argv[2]: MPI_THREAD_FUNNELED, no progress
// thread (the only form MPICH 4.0 allows, docs/reliability.md).
// CTest checks the messages; the exit status must be 0 except in 'die'.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

/// "1,3" -> {1, 3} (ascending, as the runtime lists them).
std::vector<int> parse_ranks(const char* text) {
  std::vector<int> ranks;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    ranks.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return ranks;
}

/// What every rank that arrived must say about the missing ranks (OMGS_TIMEOUT_S = T).
std::string expected_error(const std::vector<int>& missing, int size, double t) {
  char buf[200];
  if (missing.front() == 0) {
    std::snprintf(buf, sizeof buf, "rank 0, which counts the arrivals, did not answer within %g s",
                  2 * t);
    return buf;
  }
  std::string who = missing.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < missing.size(); ++i)
    who += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + std::to_string(missing[i]);
  std::snprintf(buf, sizeof buf, " of the %d ranks of the communicator did not arrive within %g s",
                size, t);
  return who + buf;
}

int absent(int rank, int size, const std::vector<int>& missing) {
  const char* timeout = std::getenv("OMGS_TIMEOUT_S");
  const bool here = std::find(missing.begin(), missing.end(), rank) == missing.end();
  int ok = timeout != nullptr && !missing.empty() ? 1 : 0;
  if (here && ok) {
    const double t = std::atof(timeout);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto rt = make_runtime();
      std::printf("error: rank %d constructed the runtime without all ranks\n", rank);
      ok = 0;
    } catch (const omgs::Error& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string want = expected_error(missing, size, t);
      // Rank 0 answers after T; without rank 0 the others give up after 2 T (3 s slack).
      const double bound = (missing.front() == 0 ? 2 : 1) * t + 3;
      ok = std::string(e.what()).find(want) != std::string::npos && s < bound;
      std::printf("rank %d (after %.1f s): %s\n", rank, s, e.what());
      if (!ok) std::printf("error: rank %d expected '%s' within the bound\n", rank, want.c_str());
    }
    std::fflush(stdout);
  }
  // The missing ranks never constructed the Runtime: they were stuck here, in a collective
  // the others had not reached. Now every rank compares verdicts and ends normally.
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == missing.front() && all)
    std::printf("construction bound test passed on the %d ranks that arrived\n",
                size - static_cast<int>(missing.size()));
  std::fflush(stdout);
  Kokkos::finalize();
  MPI_Finalize();
  return all ? 0 : 1;
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

/// The last rank dies (_Exit, no MPI_Finalize) after one iteration, under a launcher that
/// does not end the job (mpiexec --enable-recovery): the survivors' next finish() returns
/// comm_failed within OMGS_TIMEOUT_S naming it, their Runtime shuts down within
/// OMGS_SHUTDOWN_TIMEOUT_S, and they end the job with MPI_Abort, as the examples do
/// (MPI_Finalize can hang on the dead rank there: docs/reliability.md).
int die(int rank, int size) {
  auto rt = make_runtime();
  one_iteration(*rt);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) {
    std::fprintf(stderr, "rank %d: dying\n", rank);
    std::_Exit(9);
  }
  const auto t0 = std::chrono::steady_clock::now();
  rt->begin_backward();
  rt->ready(1);
  rt->ready(0);
  const omgs::IterationStats st = rt->finish();
  std::printf("rank %d: %s: %s\n", rank, omgs::to_string(st.status), rt->last_error().c_str());
  std::fflush(stdout);
  rt.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st.status == omgs::Status::comm_failed && s < 10.0)
    std::printf("rank %d: the death of rank %d reported and shut down in %.1f s; aborting\n", rank,
                size - 1, s);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 4);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // "inline" after the mode: MPI_THREAD_FUNNELED, so the Runtime has no progress thread.
  const bool inline_progress = argc > 2 && std::strcmp(argv[2], "inline") == 0;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, inline_progress ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE,
                  &provided);
  Kokkos::initialize(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "absent") == 0)
    return absent(rank, size, parse_ranks(argc > 2 ? argv[2] : ""));
  if (std::strcmp(mode, "stuck") == 0) return stuck(rank);
  if (std::strcmp(mode, "die") == 0) return die(rank, size);
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
