// omgs-train-synthetic: the gradient traffic of a real model, without a deep-learning
// framework. The model's tensor shapes come from examples/models/ (ResNet-50, VGG-16,
// BERT-base, GPT-2 small); each layer's backward is emulated by a Kokkos kernel that writes
// its gradient and costs time in proportion to the layer's backward_s. Every iteration
// runs the backward pass from the last layer to the first, hands each gradient to omgs
// (rt.ready) and waits in rt.finish(), exactly as a training code would.
//
// It compares the planners (layerwise, single, mgs, optimal by default) with a dense
// baseline: one MPI_Iallreduce per layer, posted as soon as the layer's gradient exists
// (what DDP-style data parallelism does, without bucketing). It prints one line per
// iteration and a table: iteration time, communication not hidden behind the backward
// pass, and bytes each rank sends.
//
//   mpiexec -n 4 omgs-train-synthetic --model resnet50
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/omgs.hpp>

#include "bounded_mpi.hpp"

namespace {

using Exec = omgs::ExecSpace;
using Mem = omgs::DeviceMemory;
using omgs_examples::allreduce_or_abort;
using omgs_examples::barrier_or_abort;
using omgs_examples::wait_or_abort;

constexpr const char* program = "omgs-train-synthetic";
double collective_timeout_s = 300.0;  // --collective-timeout

constexpr const char* usage_text =
    "usage: omgs-train-synthetic [--model NAME|FILE.csv] [options]\n"
    "\n"
    "Emulates the backward pass of a real model (its tensor shapes and per-layer backward\n"
    "times) and communicates its gradients with omgs under several planners, and with a dense\n"
    "MPI_Iallreduce per layer as the baseline.\n"
    "\n"
    "  --model M           resnet50 (default), vgg16, bert_base, gpt2_small, or a CSV file\n"
    "  --iterations N      timed iterations per method (default 10)\n"
    "  --warmup N          untimed iterations first (default 2)\n"
    "  --density D         fraction of each group's entries sent (default 0.001)\n"
    "  --planners LIST     comma-separated: layerwise,single,threshold,mgs,optimal\n"
    "                      (default layerwise,single,mgs,optimal)\n"
    "  --no-dense          skip the dense MPI_Iallreduce baseline\n"
    "  --perf SPEC         calibrate (default), reference, or an alpha-beta JSON file\n"
    "  --backward-scale S  emulated backward = S x the model's backward_s (default 1)\n"
    "  --numel-scale S     shrink (S < 1) every tensor, for quick runs (default 1)\n"
    "  --trace PREFIX      Chrome trace per method and rank: PREFIX.<method>.<rank>.json\n"
    "  --svg PREFIX        predicted vs measured Gantt chart per method (rank 0):\n"
    "                      PREFIX.<method>.svg\n"
    "  --quiet             only the final table\n"
    "  --collective-timeout S  bound of this program's own collectives: past it the job is\n"
    "                      aborted, naming the collective (default 300)\n"
    "  --test-leave RANK   (fault injection) rank RANK leaves the job after its first dense\n"
    "                      iteration, as a rank that failed would\n";

[[noreturn]] void usage_error(int rank, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "omgs-train-synthetic: error: %s\n", message.c_str());
  MPI_Finalize();
  std::exit(2);
}

struct Args {
  std::string model = "resnet50";
  int iterations = 10;
  int warmup = 2;
  double density = 0.001;
  std::vector<std::string> planners = {"layerwise", "single", "mgs", "optimal"};
  bool dense = true;
  std::string perf = "calibrate";
  double backward_scale = 1.0;
  double numel_scale = 1.0;
  std::string trace, svg;
  bool quiet = false;
  int test_leave = -1;
};

double number(int rank, const std::string& opt, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream m;
    m << opt << " '" << text << "' must be a number in [" << lo << ", " << hi << "]";
    usage_error(rank, m.str());
  }
  return v;
}

Args parse_args(int argc, char** argv, int rank) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      if (rank == 0) std::printf("%s", usage_text);
      MPI_Finalize();
      std::exit(0);
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(rank, "option " + opt + " needs a value");
      return argv[++i];
    };
    if (opt == "--model") {
      a.model = value();
    } else if (opt == "--iterations") {
      a.iterations = static_cast<int>(number(rank, opt, value(), 1, 1e6));
    } else if (opt == "--warmup") {
      a.warmup = static_cast<int>(number(rank, opt, value(), 0, 1e6));
    } else if (opt == "--density") {
      a.density = number(rank, opt, value(), 1e-12, 1.0);
    } else if (opt == "--planners") {
      a.planners.clear();
      std::stringstream ss(value());
      for (std::string p; std::getline(ss, p, ',');) {
        try {
          (void)omgs::parse_planner(p);
        } catch (const omgs::Error& e) {
          usage_error(rank, std::string("--planners: ") + e.what());
        }
        a.planners.push_back(p);
      }
    } else if (opt == "--no-dense") {
      a.dense = false;
    } else if (opt == "--perf") {
      a.perf = value();
    } else if (opt == "--backward-scale") {
      a.backward_scale = number(rank, opt, value(), 0, 1e6);
    } else if (opt == "--numel-scale") {
      a.numel_scale = number(rank, opt, value(), 1e-9, 1.0);
    } else if (opt == "--trace") {
      a.trace = value();
    } else if (opt == "--svg") {
      a.svg = value();
    } else if (opt == "--quiet") {
      a.quiet = true;
    } else if (opt == "--collective-timeout") {
      collective_timeout_s = number(rank, opt, value(), 1e-3, 1e6);
    } else if (opt == "--test-leave") {
      a.test_leave = static_cast<int>(number(rank, opt, value(), 0, 1e6));
    } else {
      usage_error(rank, "unknown option '" + opt + "' (see --help)");
    }
  }
  if (a.planners.empty() && !a.dense) usage_error(rank, "nothing to run");
  return a;
}

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

/// NAME -> a CSV: the path itself, $OMGS_MODELS_DIR/NAME.csv, <bin>/../share/omgs/models,
/// then the source tree's examples/models.
std::string find_model(const std::string& name, const char* argv0) {
  if (file_exists(name)) return name;
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("OMGS_MODELS_DIR")) dirs.push_back(d);
  std::string exe = argv0;
  const std::size_t slash = exe.find_last_of('/');
  if (slash != std::string::npos)
    dirs.push_back(exe.substr(0, slash) + "/../" + OMGS_INSTALL_MODELS_SUBDIR);
  dirs.push_back(OMGS_SOURCE_MODELS_DIR);
  for (const std::string& d : dirs)
    if (file_exists(d + "/" + name + ".csv")) return d + "/" + name + ".csv";
  return name;  // load_model_csv names it in its error
}

}  // namespace

// The emulated backward: a kernel that writes the gradient (a hash of rank, iteration,
// layer and index, centred on 0) after `reps` rounds of arithmetic per element. In a named
// namespace: CUDA's extended lambdas need an enclosing function with external linkage.
namespace omgs_train {

void emulate_layer(const omgs::GradientView& grad, std::uint64_t seed, int reps) {
  Kokkos::parallel_for(
      "omgs_train::backward", Kokkos::RangePolicy<Exec>(0, grad.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) {
        std::uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float x = static_cast<float>(static_cast<double>(z >> 40) * (1.0 / 16777216.0)) - 0.5f;
        float acc = x;
        for (int r = 0; r < reps; ++r) acc = acc * 0.999f + 1e-3f * x;
        grad(i) = acc;
      });
}

}  // namespace omgs_train

namespace {

using omgs_train::emulate_layer;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds per element of emulate_layer with 0 reps, and per extra rep per element.
struct KernelCost {
  double fill_s = 0, rep_s = 0;
};

KernelCost calibrate_kernel(MPI_Comm comm) {
  const std::size_t n = 1 << 20;
  omgs::GradientView v("omgs_train::calibrate", n);
  auto time = [&](int reps) {
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      Exec().fence();
      const double a = now_s();
      emulate_layer(v, static_cast<std::uint64_t>(r), reps);
      Exec().fence();
      t.push_back(now_s() - a);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double t0 = time(0), t16 = time(16);
  double c[2] = {t0 / n, std::max(1e-12, (t16 - t0) / (16.0 * n))}, g[2];
  // The slowest rank's costs, so every rank emulates the same times.
  allreduce_or_abort(c, g, 2, MPI_DOUBLE, MPI_MAX, comm, program,
                     "the kernel calibration's allreduce", collective_timeout_s);
  return {g[0], g[1]};
}

/// Reps per element so that layer l's kernel lasts about target_s.
std::vector<int> layer_reps(const std::vector<omgs::LayerSpec>& layers, const KernelCost& cost,
                            double scale) {
  std::vector<int> reps;
  for (const omgs::LayerSpec& l : layers) {
    const double n = static_cast<double>(l.numel);
    const double extra = l.backward_s * scale - n * cost.fill_s;
    reps.push_back(extra > 0 ? static_cast<int>(std::min(1e7, extra / (n * cost.rep_s))) : 0);
  }
  return reps;
}

std::uint64_t seed_of(int rank, int iteration, std::size_t layer) {
  return (static_cast<std::uint64_t>(rank) << 48) ^ (static_cast<std::uint64_t>(iteration) << 24) ^
         (static_cast<std::uint64_t>(layer) * 1000003ull);
}

// ---------------------------------------------------------------------------------------
// Methods
// ---------------------------------------------------------------------------------------

struct Result {
  std::string method;
  std::size_t groups = 0;
  double iteration_s = 0;     ///< mean over timed iterations of the slowest rank's time
  double not_hidden_s = 0;    ///< mean of the slowest rank's wait for communication
  double sparsify_s = 0;      ///< mean of the slowest rank's top-k time
  double bytes_per_iter = 0;  ///< each rank sends
  double predicted_s = -1;    ///< the plan's predicted iteration (omgs methods)
  std::string note;
};

double max_over_ranks(MPI_Comm comm, double v) {
  double m = 0;
  allreduce_or_abort(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm, program, "an allreduce of the timings",
                     collective_timeout_s);
  return m;
}

// nonfinite_gradient and plan_failed are agreed by every rank: all throw and exit
// cleanly. Anything else (comm_failed above all) may be this rank's alone: a peer may be
// gone, so MPI_Finalize could hang; abort the job.
void fail_iteration(omgs::Status s, const std::string& error, const std::string& planner, int it) {
  const std::string msg = "[" + planner + "] iteration " + std::to_string(it) + ": " +
                          std::string(omgs::to_string(s)) + ": " + error;
  if (s == omgs::Status::nonfinite_gradient || s == omgs::Status::plan_failed)
    throw omgs::Error(msg);
  omgs_examples::abort_job(MPI_COMM_WORLD, program, msg);
}

Result run_omgs(const Args& args, const std::vector<omgs::LayerSpec>& layers,
                const std::vector<int>& reps, const std::string& planner, int rank) {
  omgs::RuntimeOptions opt;
  opt.density = args.density;
  opt.planner = omgs::parse_planner(planner);
  opt.perf_model = args.perf;
  if (!args.trace.empty()) opt.trace_path = args.trace + "." + planner + ".%r.json";
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  Result r;
  r.method = planner;
  r.groups = rt.plan().groups.size();
  r.predicted_s = rt.plan().predicted.iteration_end_s;
  const std::size_t L = layers.size();
  for (int it = 0; it < args.warmup + args.iterations; ++it) {
    rt.begin_backward();
    for (std::size_t l = L; l-- > 0;) {
      emulate_layer(rt.gradient(l), seed_of(rank, it, l), reps[l]);
      Exec().fence();  // the gradient exists before omgs is told
      const omgs::Status s = rt.ready(l);
      if (s != omgs::Status::ok) fail_iteration(s, rt.last_error(), planner, it);
    }
    const omgs::IterationStats st = rt.finish();
    if (st.status != omgs::Status::ok) fail_iteration(st.status, rt.last_error(), planner, it);
    const double iter = max_over_ranks(MPI_COMM_WORLD, st.iteration_s);
    const double wait = max_over_ranks(MPI_COMM_WORLD, st.finish_wait_s);
    const double sparsify = max_over_ranks(MPI_COMM_WORLD, st.sparsify_s);
    const bool timed = it >= args.warmup;
    if (timed) {
      r.iteration_s += iter / args.iterations;
      r.not_hidden_s += wait / args.iterations;
      r.sparsify_s += sparsify / args.iterations;
      r.bytes_per_iter += static_cast<double>(st.bytes_sent) / args.iterations;
    }
    if (!args.quiet && rank == 0)
      std::printf("[%-9s] %s %3d/%d: %.4f s  (sparsify %.4f s, waited %.4f s), %zu groups\n",
                  planner.c_str(), timed ? "iteration" : "warm-up  ",
                  timed ? it - args.warmup + 1 : it + 1, timed ? args.iterations : args.warmup,
                  iter, sparsify, wait, rt.plan().groups.size());
  }
  if (!args.svg.empty() && rank == 0) rt.write_svg(args.svg + "." + planner + ".svg");
  return r;
}

Result run_dense(const Args& args, const std::vector<omgs::LayerSpec>& layers,
                 const std::vector<int>& reps, int rank) {
  const std::size_t L = layers.size();
  std::vector<std::size_t> offset(L + 1, 0);
  for (std::size_t l = 0; l < L; ++l) offset[l + 1] = offset[l] + layers[l].numel;
  omgs::GradientView grad("omgs_train::dense", offset[L]);
  // MPI works on host memory here (no assumption of GPU-aware MPI).
  auto host = Kokkos::create_mirror_view(grad);
  std::vector<MPI_Request> req(L, MPI_REQUEST_NULL);
  std::vector<int> indices(L);
  Result r;
  r.method = "dense";
  r.groups = L;
  r.note = "MPI_Iallreduce per layer";
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int it = 0; it < args.warmup + args.iterations; ++it) {
    barrier_or_abort(MPI_COMM_WORLD, program, "the dense baseline's barrier", collective_timeout_s);
    const double t0 = now_s();
    for (std::size_t l = L; l-- > 0;) {
      const auto range = std::make_pair(offset[l], offset[l + 1]);
      emulate_layer(Kokkos::subview(grad, range), seed_of(rank, it, l), reps[l]);
      Kokkos::deep_copy(Kokkos::subview(host, range), Kokkos::subview(grad, range));
      MPI_Iallreduce(MPI_IN_PLACE, host.data() + offset[l], static_cast<int>(layers[l].numel),
                     MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[l]);
      // Give MPI a chance to progress the collectives already posted. (MPI_Testsome:
      // MPICH 4.0's MPI_Testall asserts on a mix of collective and null requests.)
      int done = 0;
      MPI_Testsome(static_cast<int>(L), req.data(), &done, indices.data(), MPI_STATUSES_IGNORE);
    }
    const double t1 = now_s();
    wait_or_abort(static_cast<int>(L), req.data(), MPI_COMM_WORLD, program,
                  "the dense baseline's MPI_Iallreduce", collective_timeout_s);
    const float inv = 1.0f / static_cast<float>(size);
    for (std::size_t i = 0; i < offset[L]; ++i) host(i) *= inv;
    Kokkos::deep_copy(grad, host);
    if (it == 0 && rank == args.test_leave) {  // fault injection: this rank leaves
      std::fprintf(stderr, "%s: rank %d: leaving the job (--test-leave)\n", program, rank);
      MPI_Finalize();
      std::_Exit(0);
    }
    const double t2 = now_s();
    const double iter = max_over_ranks(MPI_COMM_WORLD, t2 - t0);
    const double wait = max_over_ranks(MPI_COMM_WORLD, t2 - t1);
    const bool timed = it >= args.warmup;
    if (timed) {
      r.iteration_s += iter / args.iterations;
      r.not_hidden_s += wait / args.iterations;
      r.bytes_per_iter += 4.0 * static_cast<double>(offset[L]) / args.iterations;
    }
    if (!args.quiet && rank == 0)
      std::printf("[%-9s] %s %3d/%d: %.4f s  (waited %.4f s)\n", "dense",
                  timed ? "iteration" : "warm-up  ", timed ? it - args.warmup + 1 : it + 1,
                  timed ? args.iterations : args.warmup, iter, wait);
  }
  return r;
}

std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args args = parse_args(argc, argv, rank);
  int status = 0;
  Kokkos::initialize(argc, argv);
  try {
    const std::string path = find_model(args.model, argv[0]);
    std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(path);
    std::uint64_t total = 0;
    double backward = 0;
    for (omgs::LayerSpec& l : layers) {
      l.numel = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(
                                               static_cast<double>(l.numel) * args.numel_scale)));
      total += l.numel;
      backward += l.backward_s * args.backward_scale;
    }
    const KernelCost cost = calibrate_kernel(MPI_COMM_WORLD);
    const std::vector<int> reps = layer_reps(layers, cost, args.backward_scale);
    if (rank == 0) {
      std::printf("omgs-train-synthetic: %s, %zu tensors, %llu elements; P = %d, density %g\n",
                  path.c_str(), layers.size(), static_cast<unsigned long long>(total), size,
                  args.density);
      std::printf("emulated backward %.4f s per iteration (Kokkos %s); MPI thread level %s\n\n",
                  backward, Exec::name(),
                  provided == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "below MULTIPLE (inline)");
    }
    // A bad --perf is reported now, not after the dense baseline has run.
    if (args.perf != "calibrate") omgs::make_perf_model(args.perf)->check_workers(size);
    std::vector<Result> results;
    if (args.dense) results.push_back(run_dense(args, layers, reps, rank));
    for (const std::string& p : args.planners)
      results.push_back(run_omgs(args, layers, reps, p, rank));
    if (rank == 0) {
      const double dense = args.dense ? results[0].iteration_s : 0;
      std::printf("\n%d timed iterations each (after %d warm-up), slowest rank, means:\n",
                  args.iterations, args.warmup);
      std::printf(
          "  method     groups  iteration_s  not_hidden_comm_s  sparsify_s  sent/rank/iter  "
          "predicted_s  speedup_vs_dense\n");
      for (const Result& r : results) {
        char pred[16] = "-", speed[16] = "-";
        if (r.predicted_s >= 0) std::snprintf(pred, sizeof pred, "%.4f", r.predicted_s);
        if (dense > 0) std::snprintf(speed, sizeof speed, "%.2f", dense / r.iteration_s);
        std::printf("  %-9s  %6zu  %11.4f  %17.4f  %10.4f  %14s  %11s  %16s\n", r.method.c_str(),
                    r.groups, r.iteration_s, r.not_hidden_s, r.sparsify_s,
                    bytes_text(r.bytes_per_iter).c_str(), pred, speed);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "omgs-train-synthetic (rank %d): error: %s\n", rank, e.what());
    status = 1;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return status;
}
