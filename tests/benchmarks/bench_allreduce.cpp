// omgs-bench-allreduce: the bare allreduce of a whole gradient, with nothing else running:
// the floor under the examples' dense baselines (docs/baselines.md) on a given network.
//   blocking     one MPI_Allreduce (the MPI library's coll/tuned choice)
//   nonblocking  one MPI_Iallreduce, MPI_Test every 50 us (as the dense baseline's thread)
//   chunks       the same data as C MPI_Iallreduce calls posted together (as C buckets)
// Usage: mpiexec -n P omgs-bench-allreduce [--mb MB=102.23] [--chunks C=4] [--reps R=5]
// Prints each form's median over R runs (a run's time is the slowest rank's), seconds.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr double kBoundS = 300.0;  // a run longer than this aborts the job (a peer is gone)

/// Completes the requests, testing every 50 us; aborts the job past kBoundS.
void wait_polling(std::vector<MPI_Request>& req) {
  const double t0 = MPI_Wtime();
  std::vector<int> indices(req.size());
  for (;;) {
    // MPI_Testsome, not MPI_Testall: MPICH 4.0's MPI_Testall asserts on a mix of collective
    // and null requests. MPI_UNDEFINED: all are complete.
    int done = 0;
    MPI_Testsome(static_cast<int>(req.size()), req.data(), &done, indices.data(),
                 MPI_STATUSES_IGNORE);
    if (done == MPI_UNDEFINED) return;
    if (MPI_Wtime() - t0 > kBoundS) {
      std::fprintf(stderr, "omgs-bench-allreduce: an allreduce took over %g s; aborting\n",
                   kBoundS);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// `chunks` == 0: blocking MPI_Allreduce; else that many MPI_Iallreduce posted together.
double run_once(std::vector<float>& send, std::vector<float>& recv, int chunks) {
  const int n = static_cast<int>(send.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (chunks == 0) {
    MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    std::vector<MPI_Request> req(static_cast<std::size_t>(chunks), MPI_REQUEST_NULL);
    for (int c = 0; c < chunks; ++c) {
      const int begin = static_cast<int>(static_cast<long long>(n) * c / chunks);
      const int end = static_cast<int>(static_cast<long long>(n) * (c + 1) / chunks);
      MPI_Iallreduce(send.data() + begin, recv.data() + begin, end - begin, MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &req[static_cast<std::size_t>(c)]);
    }
    wait_polling(req);
  }
  double t = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void usage(int rank, const char* why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "omgs-bench-allreduce: %s\nusage: omgs-bench-allreduce [--mb MB] [--chunks C] "
                 "[--reps R]\n",
                 why);
  MPI_Finalize();
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mb = 102.23;  // ResNet-50's 25,557,032 floats
  int chunks = 4, reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(rank, ("'" + a + "' needs a value").c_str());
    const char* v = argv[++i];
    if (a == "--mb")
      mb = std::atof(v);
    else if (a == "--chunks")
      chunks = std::atoi(v);
    else if (a == "--reps")
      reps = std::atoi(v);
    else
      usage(rank, ("unknown option '" + a + "'").c_str());
  }
  if (!(mb > 0 && mb <= 8000) || chunks < 1 || reps < 1)
    usage(rank, "--mb must be in (0, 8000], --chunks and --reps >= 1");
  const std::size_t n = static_cast<std::size_t>(mb * 1e6 / 4);
  std::vector<float> send(n, 1.0f), recv(n, 0.0f);
  const char* alg = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  if (rank == 0)
    std::printf(
        "%d ranks, %zu floats (%.2f MB), medians of %d runs (slowest rank); "
        "OMPI_MCA_coll_libnbc_iallreduce_algorithm=%s\n",
        size, n, 4.0 * static_cast<double>(n) / 1e6, reps, alg ? alg : "(unset)");
  const std::pair<const char*, int> forms[] = {
      {"blocking MPI_Allreduce", 0}, {"one MPI_Iallreduce", 1}, {"chunked MPI_Iallreduce", chunks}};
  for (const auto& [name, c] : forms) {
    run_once(send, recv, c);  // warm-up
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) t.push_back(run_once(send, recv, c));
    if (recv[0] != static_cast<float>(size)) {
      std::fprintf(stderr, "omgs-bench-allreduce: rank %d: wrong sum %g\n", rank, recv[0]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
      std::printf("  %-24s %3d call%s  %8.4f s\n", name, std::max(c, 1), c > 1 ? "s" : " ",
                  median(t));
  }
  MPI_Finalize();
  return 0;
}
