// The two-level exchanges' calibration (calibration_lines.hpp): the sparse node-summed exchange
// and the two-level dense allreduce themselves, groups of a few sizes in one ProgressEngine on
// the run's node shape, timed from submit to completion (each repetition the slowest rank's),
// fitted as the model's "sparse_node" and "allreduce_node" lines on the group's 4 n bytes (the
// lines' table bytes, docs/planner.md).
#include <omgs/comm.hpp>
#include <omgs/error.hpp>
#include <omgs/plan.hpp>

#include <algorithm>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"
#include "runtime/calibration_lines.hpp"

namespace omgs::detail {

namespace {

/// One exchange of group g after every rank arrived (a max over ranks): this rank's seconds.
double time_group(MPI_Comm comm, ProgressEngine& engine, int g, std::uint64_t numel,
                  double timeout_s, const char* line) {
  std::vector<double> sync(1, 0.0);
  max_over_ranks(comm, sync);
  const double a = now_s();
  const SubmitStatus s = engine.submit(g);
  const WaitStatus w = s == SubmitStatus::ok ? engine.wait(g) : WaitStatus::not_submitted;
  if (w != WaitStatus::ok)
    throw Error("omgs: calibration: the " + std::string(line) + " exchange of " +
                std::to_string(numel) + " elements did not complete within " +
                std::to_string(timeout_s) + " s (" + to_string(s) + ", " + to_string(w) + ")");
  return now_s() - a;
}

/// Groups of `sizes` of the two-level wire `kind` (sparse_node at `density`, or
/// allreduce_node) in one engine on the node shape, timed and fitted on 4 n.
LinearFit fit_node_wire(MPI_Comm comm, WireKind kind, int ranks_per_node, double density,
                        const std::vector<std::uint64_t>& sizes, int repetitions,
                        double timeout_s) {
  const bool sparse = kind == WireKind::sparse_node;
  const char* line = sparse ? "sparse_node" : "allreduce_node";
  const int rank = rank_and_size(comm).first;
  const std::size_t G = sizes.size();
  std::vector<std::vector<float>> send(G), recv(G), keep(G);
  std::vector<GroupBuffers> groups(G);
  for (std::size_t g = 0; g < G; ++g) {
    const std::size_t n = sizes[g];
    send[g].resize(n);
    recv[g].assign(n, 0.0f);
    keep[g].assign(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i)  // distinct magnitudes per rank, as gradients have
      send[g][i] = static_cast<float>((i * 2654435761u + static_cast<std::size_t>(rank)) % 1000);
    GroupBuffers& b = groups[g];
    b.kind = kind;
    b.dense_send = send[g].data();
    b.dense_recv = recv[g].data();
    b.dense_numel = n;
    if (sparse) {
      b.k = std::max<std::uint64_t>(1, selected_count(n, density));
      b.node_residual = keep[g].data();
    }
  }
  ProgressOptions po;
  po.read_environment = false;  // the runtime applied the environment
  po.ranks_per_node = ranks_per_node;
  po.wait_timeout_s = timeout_s;
  ProgressEngine engine(comm, groups, po);
  // The engine posts its groups in plan order: each repetition exchanges every group once,
  // the first repetition a warm-up.
  std::vector<std::vector<double>> samples(G);
  for (int r = 0; r <= repetitions; ++r)
    for (std::size_t g = 0; g < G; ++g) {
      const double t = time_group(comm, engine, static_cast<int>(g), sizes[g], timeout_s, line);
      if (r > 0) samples[g].push_back(t);
    }
  std::vector<double> x;
  for (std::size_t g = 0; g < G; ++g) {
    max_over_ranks(comm, samples[g]);
    x.push_back(4.0 * static_cast<double>(sizes[g]));
  }
  return fit_latency_bandwidth(x, samples);
}

}  // namespace

LinearFit fit_sparse_node(MPI_Comm comm, int ranks_per_node, double density,
                          const std::vector<std::uint64_t>& sizes, int repetitions,
                          double timeout_s) {
  return fit_node_wire(comm, WireKind::sparse_node, ranks_per_node, density, sizes, repetitions,
                       timeout_s);
}

LinearFit fit_allreduce_node(MPI_Comm comm, int ranks_per_node,
                             const std::vector<std::uint64_t>& sizes, int repetitions,
                             double timeout_s) {
  return fit_node_wire(comm, WireKind::allreduce_node, ranks_per_node, 0.0, sizes, repetitions,
                       timeout_s);
}

}  // namespace omgs::detail
