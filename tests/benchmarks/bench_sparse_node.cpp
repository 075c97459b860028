// omgs-bench-sparse-node: one sparse group at the same density, flat and node-summed, side by
// side in one run (issue 45):
//   allgather      WireKind::allgather_pairs: each rank's top-k (a host std::nth_element over
//                  the n floats, timed with it) then MPI_Iallgatherv of its k pairs
//   node-summed    WireKind::sparse_node: reduce-scatter in the node, the top-k of each shard
//                  of the node's sum on the host, allgather of the shard's pairs on the rail,
//                  the summed shards shared in the node (the top-k is inside the exchange)
// The forms alternate within each repetition (one engine, two groups), so a change of load on
// the machine touches them alike.
// Usage: mpiexec -n P omgs-bench-sparse-node [--n N=25557032] [--density D=0.001] [--reps R=5]
//          [--ranks-per-node G=0 (shared memory)]
// Prints each form's min / median / max over R runs (a run's time is the slowest rank's), the
// bytes rank 0 sent and received per exchange (GroupStats: inside its node too), and the pair
// bytes that reach rank 0 from other nodes.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/plan.hpp>

namespace {

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "omgs-bench-sparse-node: %s\nusage: omgs-bench-sparse-node [--n N] "
                 "[--density D] [--reps R] [--ranks-per-node G]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

struct Args {
  std::size_t n = 25557032;  // ResNet-50's floats
  double density = 0.001;
  int reps = 5;
  int ranks_per_node = 0;
};

Args parse(int argc, char** argv, int rank) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    if (i + 1 >= argc) usage(rank, "'" + o + "' needs a value");
    const char* v = argv[++i];
    if (o == "--n")
      a.n = static_cast<std::size_t>(std::atof(v));
    else if (o == "--density")
      a.density = std::atof(v);
    else if (o == "--reps")
      a.reps = std::atoi(v);
    else if (o == "--ranks-per-node")
      a.ranks_per_node = std::atoi(v);
    else
      usage(rank, "unknown option '" + o + "'");
  }
  if (a.n < 1 || a.n > 1000000000 || !(a.density > 0 && a.density <= 1) || a.reps < 1 ||
      a.ranks_per_node < 0)
    usage(rank, "--n in [1, 1e9], --density in (0, 1], --reps >= 1, --ranks-per-node >= 0");
  return a;
}

/// This rank's top-k of x by magnitude into pairs (the flat form's selection, on the host).
void select_pairs(const std::vector<float>& x, std::vector<std::uint32_t>& order,
                  std::vector<omgs::SparsePair>& pairs) {
  std::iota(order.begin(), order.end(), 0u);
  const auto k = static_cast<std::ptrdiff_t>(pairs.size());
  std::nth_element(
      order.begin(), order.begin() + k - 1, order.end(),
      [&x](std::uint32_t a, std::uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  for (std::size_t j = 0; j < pairs.size(); ++j) pairs[j] = {order[j], x[order[j]]};
}

/// One exchange of group g (the flat one with its selection first): the slowest rank's
/// seconds.
double run_once(omgs::ProgressEngine& e, int g, const std::vector<float>& x,
                std::vector<std::uint32_t>& order, std::vector<omgs::SparsePair>& pairs) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  if (g == 0) select_pairs(x, order, pairs);
  if (e.submit(g) != omgs::SubmitStatus::ok || e.wait(g, 600.0) != omgs::WaitStatus::ok) {
    std::fprintf(stderr, "omgs-bench-sparse-node: group %d failed\n", g);
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
  const std::size_t n = a.n, k = std::max<std::size_t>(1, omgs::selected_count(n, a.density));
  std::vector<float> x(n), sum(n, 0.0f), keep(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i)  // distinct magnitudes per rank, as gradients have
    x[i] = static_cast<float>((i * 2654435761u + static_cast<std::size_t>(rank) * 97u) % 100003) -
           50001.0f;
  std::vector<std::uint32_t> order(n);
  std::vector<omgs::SparsePair> send(k), recv(k * static_cast<std::size_t>(size));
  std::vector<omgs::GroupBuffers> groups(2);
  groups[0] = {send.data(), recv.data(), k};
  groups[1].kind = omgs::WireKind::sparse_node;
  groups[1].dense_send = x.data();
  groups[1].dense_recv = sum.data();
  groups[1].dense_numel = n;
  groups[1].k = k;
  groups[1].node_residual = keep.data();
  omgs::ProgressOptions o;
  o.ranks_per_node = a.ranks_per_node;
  o.wait_timeout_s = 600;
  {
    omgs::ProgressEngine e(MPI_COMM_WORLD, groups, o);
    const omgs::ProgressStats st = e.stats();
    if (rank == 0)
      std::printf(
          "%d ranks, %d nodes of %d, n = %zu, density %g (k = %zu), %d runs (slowest rank)\n", size,
          st.nodes, st.ranks_per_node, n, a.density, k, a.reps);
    const char* names[] = {"allgather + top-k", "node-summed"};
    std::vector<std::vector<double>> t(2);
    for (int g = 0; g < 2; ++g) run_once(e, g, x, order, send);  // warm-up
    for (int r = 0; r < a.reps; ++r)
      for (int g = 0; g < 2; ++g) t[g].push_back(run_once(e, g, x, order, send));
    const omgs::ProgressStats end = e.stats();
    // Pair bytes that cross between nodes into rank 0: the flat allgather's from the P - G
    // ranks of other nodes, the rail allgather's from the N - 1 other nodes (rank 0's shard).
    const auto G = static_cast<std::size_t>(st.ranks_per_node);
    const std::size_t shard = n / G + (n % G ? 1 : 0);
    const std::size_t k0 = std::min(shard, std::max<std::size_t>(1, (k * shard + n - 1) / n));
    const double fabric[2] = {
        static_cast<double>((static_cast<std::size_t>(size) - G) * k * 8),
        static_cast<double>((static_cast<std::size_t>(st.nodes) - 1) * k0 * 8)};
    for (int g = 0; g < 2; ++g) {
      std::sort(t[g].begin(), t[g].end());
      const double per = 1.0 / (a.reps + 1);
      if (rank == 0)
        std::printf(
            "  %-18s min %8.4f  median %8.4f  max %8.4f s  sent %.3f MB  received %.3f MB"
            "  (from other nodes %.3f MB)\n",
            names[g], t[g].front(), t[g][t[g].size() / 2], t[g].back(),
            static_cast<double>(end.groups[g].bytes_sent) * per / 1e6,
            static_cast<double>(end.groups[g].bytes_received) * per / 1e6, fabric[g] / 1e6);
    }
  }
  MPI_Finalize();
  return 0;
}
