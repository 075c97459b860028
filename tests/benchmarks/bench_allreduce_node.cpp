// omgs-bench-allreduce-node: the dense allreduce of a whole gradient through the progress
// engine, flat and in two levels, side by side in one run (issue 45):
//   flat nonblocking  WireKind::allreduce_sum, one MPI_Iallreduce
//   flat blocking     WireKind::allreduce_sum with blocking_allreduce (MPI_Allreduce by the
//                     progress thread: the MPI library's tuned choice)
//   two-level         WireKind::allreduce_node: reduce-scatter in the node, allreduce of the
//                     shard on the rail, allgather in the node
// The forms alternate within each repetition (one engine, three groups in plan order), so a
// change of load on the machine touches them alike.
// Usage: mpiexec -n P omgs-bench-allreduce-node [--mb MB=102.23] [--reps R=5]
//          [--ranks-per-node G=0 (shared memory)]
// Prints each form's min / median / max over R runs (a run's time is the slowest rank's).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <omgs/comm.hpp>

namespace {

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "omgs-bench-allreduce-node: %s\nusage: omgs-bench-allreduce-node [--mb MB] "
                 "[--reps R] [--ranks-per-node G]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

struct Args {
  double mb = 102.23;  // ResNet-50's 25,557,032 floats
  int reps = 5;
  int ranks_per_node = 0;
};

Args parse(int argc, char** argv, int rank) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    if (i + 1 >= argc) usage(rank, "'" + o + "' needs a value");
    const char* v = argv[++i];
    if (o == "--mb")
      a.mb = std::atof(v);
    else if (o == "--reps")
      a.reps = std::atoi(v);
    else if (o == "--ranks-per-node")
      a.ranks_per_node = std::atoi(v);
    else
      usage(rank, "unknown option '" + o + "'");
  }
  if (!(a.mb > 0 && a.mb <= 8000) || a.reps < 1 || a.ranks_per_node < 0)
    usage(rank, "--mb must be in (0, 8000], --reps >= 1, --ranks-per-node >= 0");
  return a;
}

/// One exchange of group g: the slowest rank's seconds from submit to completion.
double run_once(omgs::ProgressEngine& e, int g) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  if (e.submit(g) != omgs::SubmitStatus::ok || e.wait(g, 600.0) != omgs::WaitStatus::ok) {
    std::fprintf(stderr, "omgs-bench-allreduce-node: group %d failed\n", g);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args a = parse(argc, argv, rank);
  const auto n = static_cast<std::size_t>(a.mb * 1e6 / 4);
  const char* names[] = {"flat nonblocking", "flat blocking", "two-level"};
  constexpr int forms = 3;
  std::vector<std::vector<float>> send(forms, std::vector<float>(n, 1.0f)),
      recv(forms, std::vector<float>(n, 0.0f));
  std::vector<omgs::GroupBuffers> groups(forms);
  for (int g = 0; g < forms; ++g) {
    groups[g].kind = g == 2 ? omgs::WireKind::allreduce_node : omgs::WireKind::allreduce_sum;
    groups[g].dense_send = send[g].data();
    groups[g].dense_recv = recv[g].data();
    groups[g].dense_numel = n;
    groups[g].blocking_allreduce = g == 1;
  }
  omgs::ProgressOptions o;
  o.ranks_per_node = a.ranks_per_node;
  o.wait_timeout_s = 600;
  {
    omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
    const omgs::ProgressStats st = e.stats();
    if (rank == 0)
      std::printf("%d ranks, %d nodes of %d, %zu floats (%.2f MB), %d runs (slowest rank)\n", size,
                  st.nodes, st.ranks_per_node, n, 4.0 * static_cast<double>(n) / 1e6, a.reps);
    std::vector<std::vector<double>> t(forms);
    for (int g = 0; g < forms; ++g) run_once(e, g);  // warm-up
    for (int r = 0; r < a.reps; ++r)
      for (int g = 0; g < forms; ++g) t[g].push_back(run_once(e, g));
    for (int g = 0; g < forms; ++g) {
      if (recv[g][0] != static_cast<float>(size) || recv[g][n - 1] != static_cast<float>(size)) {
        std::fprintf(stderr, "omgs-bench-allreduce-node: rank %d: %s: wrong sum %g\n", rank,
                     names[g], recv[g][0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::sort(t[g].begin(), t[g].end());
      if (rank == 0)
        std::printf("  %-18s min %8.4f  median %8.4f  max %8.4f s\n", names[g], t[g].front(),
                    t[g][t[g].size() / 2], t[g].back());
    }
  }
  MPI_Finalize();
  return 0;
}
