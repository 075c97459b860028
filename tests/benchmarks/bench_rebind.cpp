// A plan change on the progress engine, as the runtime's install does it: rebuilding the
// engine (MPI_Comm_dup x3, the set-up collectives, a thread join and start) against
// ProgressEngine::rebind (the agreement on the new groups only), alternated in one run;
// each followed by one exchange of every group (the first iteration on the new plan).
//   mpiexec -n 4 omgs-bench-rebind [--groups 54] [--k 100] [--repeats 10]
// Per repeat the slowest rank's seconds; min / median / max over the repeats and the ratio
// of the medians.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <omgs/comm.hpp>

namespace {

struct Set {
  std::vector<std::vector<omgs::SparsePair>> send, recv;
  std::vector<omgs::GroupBuffers> groups;
  Set(int G, std::size_t k, int P) {
    for (int g = 0; g < G; ++g) {
      send.emplace_back(k, omgs::SparsePair{1, 1.0f});
      recv.emplace_back(k * static_cast<std::size_t>(P));
    }
    for (int g = 0; g < G; ++g) groups.push_back({send[g].data(), recv[g].data(), k});
  }
};

bool exchange_all(omgs::ProgressEngine& e) {
  for (int g = 0; g < e.num_groups(); ++g)
    if (e.submit(g) != omgs::SubmitStatus::ok) return false;
  return e.wait_all() == omgs::WaitStatus::ok;
}

double slowest(double t) {
  double out = 0;
  MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

void print_row(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("  %-34s %.5f / %.5f / %.5f\n", name, v.front(), v[v.size() / 2], v.back());
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int G = 54, repeats = 10;
  std::size_t k = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (v < 1) {
      if (rank == 0) std::fprintf(stderr, "omgs-bench-rebind: %s must be >= 1\n", opt.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (opt == "--groups") G = static_cast<int>(v);
    if (opt == "--k") k = static_cast<std::size_t>(v);
    if (opt == "--repeats") repeats = static_cast<int>(v);
  }
  Set a(G, k, P), b(G + 1, k, P);  // two plans: G and G + 1 groups
  omgs::ProgressOptions o;
  o.read_environment = false;
  std::vector<double> rebuild_s, rebind_s;
  bool ok = true;
  auto engine = std::make_unique<omgs::ProgressEngine>(MPI_COMM_WORLD, a.groups, o);
  for (int r = 0; r < repeats && ok; ++r) {
    const Set& next = r % 2 ? a : b;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    engine.reset();  // the install before rebind: one progress thread at a time
    engine = std::make_unique<omgs::ProgressEngine>(MPI_COMM_WORLD, next.groups, o);
    ok = exchange_all(*engine);
    rebuild_s.push_back(slowest(MPI_Wtime() - t0));
    const Set& back = r % 2 ? b : a;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    engine->rebind(back.groups);
    ok = ok && exchange_all(*engine);
    rebind_s.push_back(slowest(MPI_Wtime() - t0));
  }
  if (rank == 0) {
    std::printf(
        "omgs-bench-rebind: %d ranks, %d / %d groups of k = %zu pairs, %d repeats, %s;\n"
        "a plan change and one exchange of every group, slowest rank, s min / median / "
        "max:\n",
        P, G, G + 1, k, repeats,
        engine->mode() == omgs::ProgressMode::thread ? "progress thread" : "inline");
    print_row("rebuild (destroy, construct)", rebuild_s);
    print_row("rebind", rebind_s);
    std::vector<double> x = rebuild_s, y = rebind_s;
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    std::printf("  rebind / rebuild, medians: %.3f%s\n", y[y.size() / 2] / x[x.size() / 2],
                ok ? "" : "  (an exchange failed)");
  }
  engine.reset();
  MPI_Finalize();
  return ok ? 0 : 1;
}
