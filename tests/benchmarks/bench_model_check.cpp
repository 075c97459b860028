// omgs-bench-model-check: each collective's predicted time beside its measured one, in one
// run (issue 46, docs/model-check.md). The model is calibrated once, as the runtime does at
// start-up (every row's line), and saved; then for each collective and wire format and each
// group size a Runtime with that one group (the model loaded, the closed loop off) runs
// --reps iterations, and its measured communication (post to completion of the group, the
// slowest rank's) is set beside the plan's predicted one.
// Usage: mpiexec -n P omgs-bench-model-check [--sizes 1e4,1e5,1e6,1e7] [--density 0.001]
//          [--reps R=7] [--perf FILE (instead of calibrating)] [--save FILE] [--inline]
// --inline runs the groups without a progress thread (finish() drives MPI), to separate what
// the progress thread's scheduling adds where ranks outnumber cores.
// Prints a row per (collective, wire, elements): predicted, measured min / median / max, the
// median's error against the prediction, and (8-byte pairs and fp32) the bare MPI operation's
// median timed the way calibration times it (barrier, call, wait as progress_idle says,
// comm/collectives.hpp: no progress thread), which
// splits the error into the fit's (predicted vs bare) and the runtime path's (bare vs measured).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/runtime.hpp>

#include "comm/collectives.hpp"

namespace {

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "omgs-bench-model-check: %s\nusage: omgs-bench-model-check [--sizes N,N,...] "
                 "[--density D] [--reps R] [--perf FILE] [--save FILE] [--inline]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

struct Args {
  std::vector<std::uint64_t> sizes = {10000, 100000, 1000000, 10000000};
  double density = 0.001;
  int reps = 7;
  std::string perf;                                 // empty: calibrate
  std::string save = "omgs_model_check_perf.json";  // where the calibrated model goes
  bool inline_progress = false;
};

std::vector<std::uint64_t> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const double v = std::atof(item.c_str());
    if (!(v >= 1 && v <= 4e9)) return {};
    out.push_back(static_cast<std::uint64_t>(v));
  }
  return out;
}

Args parse(int argc, char** argv, int rank) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    if (o == "--inline") {
      a.inline_progress = true;
      continue;
    }
    if (i + 1 >= argc) usage(rank, "'" + o + "' needs a value");
    const std::string v = argv[++i];
    if (o == "--sizes")
      a.sizes = parse_sizes(v);
    else if (o == "--density")
      a.density = std::atof(v.c_str());
    else if (o == "--reps")
      a.reps = std::atoi(v.c_str());
    else if (o == "--perf")
      a.perf = v;
    else if (o == "--save")
      a.save = v;
    else
      usage(rank, "unknown option '" + o + "'");
  }
  if (a.sizes.empty() || !(a.density > 0 && a.density <= 1) || a.reps < 1)
    usage(rank, "--sizes must list numbers in [1, 4e9], --density be in (0, 1], --reps >= 1");
  return a;
}

/// One row of the check: a collective the planner is limited to, with its wire formats.
struct Case {
  const char* name;
  omgs::Collective collective;
  omgs::PairWire pair_wire;
  omgs::DenseWire dense_wire;
};

const std::vector<Case>& cases() {
  using C = omgs::Collective;
  using PW = omgs::PairWire;
  using DW = omgs::DenseWire;
  static const std::vector<Case> all = {
      {"allgather pairs8", C::sparse, PW::pairs8, DW::automatic},
      {"allgather bf16", C::sparse, PW::bf16, DW::automatic},
      {"sparse_allreduce pairs8", C::sparse_allreduce, PW::pairs8, DW::automatic},
      {"sparse_allreduce bf16", C::sparse_allreduce, PW::bf16, DW::automatic},
      {"dense fp32", C::dense, PW::pairs8, DW::fp32},
      {"dense bf16", C::dense, PW::pairs8, DW::bf16},
  };
  return all;
}

omgs::RuntimeOptions base_options(const Args& a) {
  omgs::RuntimeOptions opt;
  opt.density = a.density;
  opt.refit_iterations = 0;  // the prediction checked is the calibrated model's
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  opt.dense_allreduce = omgs::DenseAllreduce::nonblocking;
  opt.force_inline_progress = a.inline_progress;
  return opt;
}

/// Calibrates as the runtime does with every row allowed, on the largest group, and saves
/// the model (rank 0 writes the file every rank then reads).
std::string calibrate(const Args& a, int rank) {
  if (!a.perf.empty()) return a.perf;
  omgs::RuntimeOptions opt = base_options(a);
  opt.perf_model = "calibrate";
  opt.collectives = {omgs::Collective::sparse, omgs::Collective::sparse_allreduce,
                     omgs::Collective::dense};
  const std::uint64_t largest = *std::max_element(a.sizes.begin(), a.sizes.end());
  omgs::Runtime rt(MPI_COMM_WORLD, {{"g", largest, 1e-4}}, opt);
  if (rank == 0) {
    rt.save_perf_model(a.save);
    const omgs::CalibrationReport& c = rt.calibration();
    std::printf("# calibrated in %.1f s: %s\n", c.duration_s, rt.perf_model().describe().c_str());
    // The fastest repetition per size, what the lines were fitted to: a fitted latency far
    // above the smallest size's time comes from the fit, one near it from the timing.
    std::printf("# calibration allgather ms:");
    for (std::size_t i = 0; i < c.allgather_s.size(); ++i)
      std::printf(" %llu pairs %.3f", static_cast<unsigned long long>(c.allgather_pairs[i]),
                  1e3 * c.allgather_s[i]);
    std::printf("\n# calibration allreduce ms:");
    for (std::size_t i = 0; i < c.allreduce_s.size(); ++i)
      std::printf(" %llu floats %.3f", static_cast<unsigned long long>(c.allreduce_numel[i]),
                  1e3 * c.allreduce_s[i]);
    std::printf("\n");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return a.save;
}

double slowest(double t) {
  double out = t;
  MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double comm_s(const omgs::GroupTiming& t) {
  return t.comm_end_s - t.comm_start_s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The bare operation under case c (8-byte pairs and fp32 only; NaN otherwise): the median
/// over reps of the slowest rank's call-to-completion, after a barrier, with k pairs of
/// distinct random indices and normal values per rank (like the runtime's top-k).
double bare_s(const Case& c, std::uint64_t n, std::uint64_t k, int reps, int rank) {
  const bool plain = c.collective == omgs::Collective::dense
                         ? c.dense_wire == omgs::DenseWire::fp32
                         : c.pair_wire == omgs::PairWire::pairs8;
  if (!plain) return std::numeric_limits<double>::quiet_NaN();
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  std::mt19937 rng(7 + rank);
  std::vector<omgs::SparsePair> pairs(k), all(k * static_cast<std::uint64_t>(P));
  std::normal_distribution<float> value(0.0f, 1.0f);  // as the runtime's groups get
  const std::uint64_t stride = std::max<std::uint64_t>(1, n / std::max<std::uint64_t>(1, k));
  for (std::uint64_t i = 0; i < k; ++i)  // one index in each stride: distinct, spread over n
    pairs[i] = {static_cast<std::uint32_t>(std::min(n - 1, i * stride + rng() % stride)),
                value(rng)};
  std::vector<float> dense(c.collective == omgs::Collective::dense ? n : 0, 1.0f), sum(dense);
  std::unique_ptr<omgs::detail::SparseAllreduce> sar;
  if (c.collective == omgs::Collective::sparse_allreduce)
    sar = std::make_unique<omgs::detail::SparseAllreduce>(MPI_COMM_WORLD, n, k);
  const omgs::IdleOptions idle = omgs::detail::progress_idle(
      MPI_COMM_WORLD, Kokkos::DefaultHostExecutionSpace().concurrency());
  std::vector<double> t;
  for (int it = 0; it <= reps; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Request req = MPI_REQUEST_NULL;
    if (c.collective == omgs::Collective::dense)
      MPI_Iallreduce(dense.data(), sum.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &req);
    else if (sar)
      sar->start(pairs.data(), pairs.size());
    else
      MPI_Iallgather(pairs.data(), static_cast<int>(8 * k), MPI_BYTE, all.data(),
                     static_cast<int>(8 * k), MPI_BYTE, MPI_COMM_WORLD, &req);
    if (sar && !sar->wait(600.0)) MPI_Abort(MPI_COMM_WORLD, 1);
    if (req != MPI_REQUEST_NULL) omgs::detail::wait_as_progress_thread(req, idle);
    if (it > 0) t.push_back(slowest(MPI_Wtime() - t0));
  }
  return median(t);
}

/// Runs one case at one size; prints its row on rank 0.
void check(const Args& a, const std::string& perf, const Case& c, std::uint64_t n, int rank) {
  omgs::RuntimeOptions opt = base_options(a);
  opt.perf_model = perf;
  opt.collectives = {c.collective};
  opt.planner =
      c.collective == omgs::Collective::dense ? omgs::Planner::dense : omgs::Planner::single;
  opt.pair_wire = c.pair_wire;
  opt.dense_wire = c.dense_wire;
  omgs::Runtime rt(MPI_COMM_WORLD, {{"g", n, 1e-4}}, opt);
  if (rt.plan().groups.size() != 1 || rt.plan().groups[0].collective != c.collective) {
    if (rank == 0)
      std::printf("%-24s %11llu  (not planned as asked)\n", c.name,
                  static_cast<unsigned long long>(n));
    return;
  }
  const double predicted = comm_s(rt.plan().predicted.groups[0]);
  std::mt19937 rng(17 + rank);
  std::normal_distribution<float> draw(0.0f, 1.0f);
  std::vector<float> g(n);
  auto host = Kokkos::create_mirror_view(rt.gradient(0));
  std::vector<double> measured;
  for (int it = 0; it <= a.reps; ++it) {  // the first is a warm-up
    for (std::uint64_t i = 0; i < n; ++i) host(i) = draw(rng);
    Kokkos::deep_copy(rt.gradient(0), host);
    MPI_Barrier(MPI_COMM_WORLD);
    rt.begin_backward();
    if (rt.ready(0) != omgs::Status::ok || rt.finish().status != omgs::Status::ok) {
      std::fprintf(stderr, "omgs-bench-model-check: %s at %llu failed\n", c.name,
                   static_cast<unsigned long long>(n));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const double t = slowest(comm_s(rt.stats().measured.groups[0]));
    if (it > 0) measured.push_back(t);
  }
  const double med = median(measured), bare = bare_s(c, n, rt.group_k(0), a.reps, rank);
  std::sort(measured.begin(), measured.end());
  if (rank == 0)
    std::printf("%-24s %11llu %9llu %12.6f %12.6f %12.6f %12.6f %+8.0f%% %12.6f\n", c.name,
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(rt.group_k(0)),
                predicted, measured.front(), med, measured.back(), 100.0 * (med / predicted - 1.0),
                bare);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args a = parse(argc, argv, rank);
  Kokkos::initialize(argc, argv);
  try {
    const std::string perf = calibrate(a, rank);
    if (rank == 0)
      std::printf(
          "# P = %d, density %g, %d runs each (the slowest rank's post-to-completion), %s\n"
          "%-24s %11s %9s %12s %12s %12s %12s %9s %12s\n",
          size, a.density, a.reps, a.inline_progress ? "inline progress" : "progress thread",
          "collective wire", "elements", "k", "predicted_s", "min_s", "median_s", "max_s", "error",
          "bare_s");
    for (const Case& c : cases())
      for (std::uint64_t n : a.sizes) check(a, perf, c, n, rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "omgs-bench-model-check: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
