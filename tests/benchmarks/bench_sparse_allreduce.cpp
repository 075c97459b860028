// omgs-bench-sparse-allreduce: one group's exchange alone, three ways, in the same run:
//   allgather         MPI_Iallgather of every rank's k (index, value) pairs (omgs' sparse
//                     groups today): each rank receives (P - 1) k pairs
//   sparse-allreduce  detail::SparseAllreduce (Ok-Topk style): regions reduced point to
//                     point, a global threshold, the survivors allgathered: O(k) per rank
//   dense             MPI_Allreduce of the whole group (with --dense)
//   sparse-allreduce W  the same sparse allreduce in the compact pair format with W values
//                     (with --pair-wire W: fp32, bf16 or fp16), beside the 8-byte pairs' one
// Usage: mpiexec -n P omgs-bench-sparse-allreduce [--numel N=1e7] [--density D=0.001]
//          [--source S=uniform] [--overlap F=0] [--reps R=5] [--dense] [--pair-wire W]
// Each rank selects k = N D distinct indices from source S (tests/support/sparse_sources.hpp:
// uniform, with a fraction F of them the same on every rank as correlated gradients have;
// zipf; clustered), a new draw every run (the warm-up run's first); or, with file:PATH, its
// top-k of a saved real gradient (omgs-train-torch --save-gradients PATH: S ranks' gradients
// of I iterations; N is the file's elements; rank r's run t takes saved rank r mod S's
// iteration (t + r / S) mod I, so up to S I ranks select from different gradients). Forms
// alternate; a run's time is the slowest rank's; bytes are payload per rank (the largest over
// ranks); max/mean is the busiest region's received pairs against the mean over ranks (the worst
// run's, and the warm-up run's, the first exchange of the object); rounds: the dependent rounds
// of a measured run, on average (5, or 4 where the last exchange's histogram bin held);
// region_MB and batches: the most bytes a rank held at once to reduce its region and the
// batches its peers' messages took (Stats::region_bytes, batches: the windowed receive), the
// largest over ranks and measured runs.
// Waits poll every 50 us, as omgs' progress thread does.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <omgs/detail/sparse_allreduce.hpp>
#include <omgs/error.hpp>

#include "gradient_file.hpp"
#include "sparse_sources.hpp"

namespace {

using omgs::PairWire;
using omgs::SparsePair;
using omgs::detail::SparseAllreduce;

constexpr double kBoundS = 300.0;

using omgs_test::SparseSource;

struct Options {
  double numel = 1e7, density = 0.001, overlap = 0.0;
  SparseSource source = SparseSource::uniform;
  std::string file;  // --source file:PATH: saved gradients instead
  int reps = 5;
  bool dense = false;
  PairWire wire = PairWire::pairs8;  // pairs8: no compact row
};

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "omgs-bench-sparse-allreduce: %s\nusage: omgs-bench-sparse-allreduce [--numel N] "
                 "[--density D] [--source uniform|zipf|clustered|file:PATH] [--overlap F] [--reps "
                 "R] [--dense] "
                 "[--pair-wire fp32|bf16|fp16]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

Options parse(int argc, char** argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dense") {
      o.dense = true;
      continue;
    }
    if (i + 1 >= argc) usage(rank, "'" + a + "' needs a value");
    if (a == "--pair-wire") {
      try {
        o.wire = omgs::parse_pair_wire(argv[++i]);
      } catch (const omgs::Error& e) {
        usage(rank, e.what());
      }
      continue;
    }
    if (a == "--source") {
      const std::string v = argv[++i];
      if (v.rfind("file:", 0) == 0) {
        o.file = v.substr(5);
        continue;
      }
      try {
        o.source = omgs_test::parse_sparse_source(v);
      } catch (const std::invalid_argument& e) {
        usage(rank, e.what());
      }
      continue;
    }
    const double v = std::atof(argv[++i]);
    if (a == "--numel")
      o.numel = v;
    else if (a == "--density")
      o.density = v;
    else if (a == "--overlap")
      o.overlap = v;
    else if (a == "--reps")
      o.reps = static_cast<int>(v);
    else
      usage(rank, "unknown option '" + a + "'");
  }
  if (!(o.numel >= 1 && o.numel <= 4294967296.0) || !(o.density > 0 && o.density <= 1) ||
      !(o.overlap >= 0 && o.overlap <= 1) || o.reps < 1)
    usage(rank, "--numel in [1, 2^32], --density in (0, 1], --overlap in [0, 1], --reps >= 1");
  return o;
}

void wait_polling(MPI_Request* req) {
  const double t0 = MPI_Wtime();
  for (int flag = 0;;) {
    MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (flag) return;
    if (MPI_Wtime() - t0 > kBoundS) MPI_Abort(MPI_COMM_WORLD, 1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

double slowest(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

std::uint64_t largest(std::uint64_t b) {
  std::uint64_t m = 0;
  MPI_Allreduce(&b, &m, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

struct Row {
  std::string name;
  std::vector<double> t;
  std::uint64_t sent = 0, received = 0;
  double bytes_per_pair = 0;  // the sparse allreduce's pairs (rank 0's)
  // The busiest region's received pairs / the mean: the worst measured run's, the warm-up's.
  double imbalance = 0, first_imbalance = 0;
  std::uint64_t rounds = 0;  // the sparse allreduce's dependent rounds, summed over the runs
  std::uint64_t region_bytes = 0, batches = 0;  // the windowed receive's, largest

  double median() const {
    std::vector<double> s = t;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

void print(const Row& r) {
  std::vector<double> t = r.t;
  std::sort(t.begin(), t.end());
  std::printf("  %-22s %12.3f %12.3f %10.5f %10.5f %10.5f", r.name.c_str(), r.sent / 1e6,
              r.received / 1e6, t.front(), t[t.size() / 2], t.back());
  if (r.bytes_per_pair > 0)
    std::printf(" %8.2f %8.3f %8.3f %6.2f %9.3f %7llu", r.bytes_per_pair, r.imbalance,
                r.first_imbalance, static_cast<double>(r.rounds) / static_cast<double>(r.t.size()),
                r.region_bytes / 1e6, static_cast<unsigned long long>(r.batches));
  std::printf("\n");
}

/// The busiest rank's region_pairs against the mean over ranks.
double imbalance_of(const SparseAllreduce& ex, int ranks) {
  const std::uint64_t mine = ex.stats().region_pairs;
  std::uint64_t sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const double mean = static_cast<double>(sum) / ranks;
  return mean > 0 ? static_cast<double>(largest(mine)) / mean : 1.0;
}

/// One exchange of `mine` by `ex`, the slowest rank's seconds; its bytes and balance into
/// `row` (the balance into first_imbalance for the warm-up run).
double time_sparse(SparseAllreduce& ex, const std::vector<SparsePair>& mine, Row& row, bool warm_up,
                   int ranks) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  ex.start(mine.data(), mine.size());
  while (!ex.test()) {
    if (MPI_Wtime() - t0 > kBoundS) MPI_Abort(MPI_COMM_WORLD, 1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  const double t = slowest(MPI_Wtime() - t0);
  const double imbalance = imbalance_of(ex, ranks);
  if (warm_up) {
    row.first_imbalance = imbalance;
    return t;
  }
  row.t.push_back(t);
  row.sent = std::max(row.sent, largest(ex.stats().bytes_sent));
  row.received = std::max(row.received, largest(ex.stats().bytes_received));
  row.imbalance = std::max(row.imbalance, imbalance);
  row.rounds += ex.stats().rounds;
  row.region_bytes = std::max(row.region_bytes, largest(ex.stats().region_bytes));
  row.batches = std::max(row.batches, largest(ex.stats().batches));
  const auto& st = ex.stats();
  if (st.pairs_sent > 0)
    row.bytes_per_pair = static_cast<double>(st.pair_bytes_sent) / st.pairs_sent;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int level = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &level);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Options o = parse(argc, argv, rank);
  omgs_examples::GradientFile saved;
  if (!o.file.empty()) {
    try {  // every rank reads the same file, so every rank fails alike
      saved = omgs_examples::read_gradient_file(o.file);
    } catch (const std::runtime_error& e) {
      usage(rank, e.what());
    }
  }
  const double numel = o.file.empty() ? o.numel : static_cast<double>(saved.total());
  const auto n = static_cast<std::uint64_t>(numel);
  const auto k = std::max<std::size_t>(1, static_cast<std::size_t>(numel * o.density));
  const std::string source = o.file.empty() ? omgs_test::to_string(o.source) : "file:" + o.file;
  std::vector<SparsePair> mine;
  std::vector<SparsePair> gathered(k * static_cast<std::size_t>(size));
  MPI_Datatype pair;
  MPI_Type_contiguous(8, MPI_BYTE, &pair);
  MPI_Type_commit(&pair);
  SparseAllreduce sparse(MPI_COMM_WORLD, n, k);
  const bool compact = o.wire != PairWire::pairs8;
  std::unique_ptr<SparseAllreduce> packed;
  if (compact) packed = std::make_unique<SparseAllreduce>(MPI_COMM_WORLD, n, k, o.wire);
  std::vector<float> dense_buf(o.dense ? n : 0, 1.0f);

  Row ag{"allgather", {}, k * 8, (size - 1) * k * 8ull}, sp{"sparse-allreduce", {}},
      de{"dense", {}, n * 4, n * 4},
      cp{"sparse-allreduce " + std::string(omgs::to_string(o.wire)), {}};
  std::uint64_t survivors = 0;
  for (int r = -1; r < o.reps; ++r) {  // r = -1: warm-up
    if (o.file.empty()) {
      mine = omgs_test::source_pairs(o.source, n, k, rank, r + 1, o.overlap);
    } else {
      const auto s = static_cast<std::uint32_t>(rank) % saved.ranks;
      const auto it =
          (static_cast<std::uint32_t>(r + 1) + static_cast<std::uint32_t>(rank) / saved.ranks) %
          saved.iterations;
      mine = omgs_test::top_k_pairs(saved.record(it, s), n, k);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Request req;
    MPI_Iallgather(mine.data(), static_cast<int>(k), pair, gathered.data(), static_cast<int>(k),
                   pair, MPI_COMM_WORLD, &req);
    wait_polling(&req);
    const double t_ag = slowest(MPI_Wtime() - t0);
    // The two sparse allreduces take turns going first (the one after may find the links
    // and the peers warmer).
    const bool packed_first = compact && r % 2 != 0;
    if (packed_first) time_sparse(*packed, mine, cp, r < 0, size);
    time_sparse(sparse, mine, sp, r < 0, size);
    if (compact && !packed_first) time_sparse(*packed, mine, cp, r < 0, size);
    double t_de = 0;
    if (o.dense) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, dense_buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      t_de = slowest(MPI_Wtime() - t0);
    }
    if (r < 0) continue;
    ag.t.push_back(t_ag);
    de.t.push_back(t_de);
    survivors = sparse.stats().survivors;
  }
  if (rank == 0) {
    std::printf(
        "%d ranks, one group of %llu elements, density %g: k = %zu pairs per rank, "
        "source %s, overlap %g; %d runs (slowest rank each)\n",
        size, static_cast<unsigned long long>(n), o.density, k, source.c_str(), o.overlap, o.reps);
    std::printf("  %-22s %12s %12s %10s %10s %10s %8s %8s %8s %6s %9s %7s\n", "exchange", "sent_MB",
                "received_MB", "min_s", "median_s", "max_s", "B/pair", "max/mean", "first",
                "rounds", "region_MB", "batches");
    print(ag);
    print(sp);
    if (compact) print(cp);
    if (o.dense) print(de);
    const auto ratio = [](std::uint64_t a, std::uint64_t b) {
      return static_cast<double>(a) / static_cast<double>(std::max<std::uint64_t>(1, b));
    };
    std::printf(
        "  allgather / sparse-allreduce: received bytes %.2fx, median time %.2fx; "
        "survivors %llu (k %zu)\n",
        ratio(ag.received, sp.received), ag.median() / sp.median(),
        static_cast<unsigned long long>(survivors), k);
    if (compact)
      std::printf(
          "  sparse-allreduce pairs8 / %s: sent bytes %.2fx, received bytes %.2fx, median time "
          "%.2fx\n",
          std::string(omgs::to_string(o.wire)).c_str(), ratio(sp.sent, cp.sent),
          ratio(sp.received, cp.received), sp.median() / cp.median());
  }
  MPI_Type_free(&pair);
  MPI_Finalize();
  return 0;
}
