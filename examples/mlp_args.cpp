#include "mlp_args.hpp"

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "bounded_mpi.hpp"

namespace omgs_train_mlp {
namespace {

constexpr const char* usage_text =
    "usage: mpiexec -n P omgs-train-mlp [options]\n"
    "\n"
    "Trains an MLP (dim -> hidden -> hidden -> classes, ReLU, softmax cross-entropy) on a\n"
    "generated classification task three times, from the same initial weights: dense SGD as\n"
    "DDP does it (dense-bucket: gradients fused into --bucket-mb buckets in backward order,\n"
    "each MPI_Iallreduce'd as soon as it is full, overlapped with backward), dense SGD with\n"
    "one MPI_Iallreduce per tensor (dense-layer, for its time), and top-k SGD with error\n"
    "feedback through omgs::Runtime (planner mgs, perf model calibrate, backward times\n"
    "measured by the runtime from the spacing of ready() calls: every LayerSpec::backward_s\n"
    "is 0, so the first 5 iterations communicate layer by layer, then the runtime plans).\n"
    "Prints the loss per epoch, each run's training time (and the allreduce of each dense\n"
    "run: in place or a separate send buffer, whichever a start-up measurement finds faster)\n"
    "and PASS/FAIL: the sparse run's final-epoch training loss is at most tolerance% above\n"
    "dense-bucket's. Exit status: 0 PASS, 1 FAIL or a runtime error, 2 bad arguments.\n"
    "\n"
    "  --epochs N      passes over the data (default 8)\n"
    "  --batch B       mini-batch per rank (default 64)\n"
    "  --hidden H      width of both hidden layers (default 128)\n"
    "  --classes C     number of classes (default 10)\n"
    "  --dim D         input dimension (default 32)\n"
    "  --samples N     training samples per rank (default 4096)\n"
    "  --density D     fraction of each merged group's entries sent, in (0, 1] (default 0.05)\n"
    "  --lr LR         learning rate, the same for every run (default 0.1)\n"
    "  --noise S       standard deviation of the samples around their class centre, whose\n"
    "                  coordinates are N(0, 1) (default 2)\n"
    "  --tolerance T   allowed excess of the sparse loss over dense-bucket's, in percent\n"
    "                  (default 5)\n"
    "  --bucket-mb MB  dense-bucket's bucket size in MB of floats, in (0, 2048] (default 25)\n"
    "  --seed S        data and weight seed (default 42)\n"
    "  --gradient-type T  the sparse run's gradients: fp32 (default), bf16 or fp16: the\n"
    "                  backward pass rounds each gradient into the runtime's 16-bit slot\n"
    "                  (rt.gradient_bf16 / _fp16) and SGD reads the 16-bit aggregate\n"
    "  --quiet         print only the verdict line\n"
    "  --collective-timeout S  bound of each wait for this program's own collectives (the\n"
    "                  dense runs' allreduces too): past it the job is aborted, naming the\n"
    "                  collective (default 300)\n"
    "  --help          this text\n";

}  // namespace

int parse_args(int argc, char** argv, int rank, Args& a) {
  auto fail = [&](const std::string& message) {
    if (rank == 0)
      std::fprintf(stderr, "omgs-train-mlp: error: %s (see --help)\n", message.c_str());
    return 2;
  };
  auto number = [](const std::string& text, double lo, double hi, bool integer, double& out) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
    if (integer && v != std::floor(v)) return false;
    out = v;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt.rfind("--kokkos-", 0) == 0) continue;  // Kokkos' own options
    if (opt == "-h" || opt == "--help") {
      if (rank == 0) std::printf("%s", usage_text);
      return 0;
    }
    if (opt == "--quiet") {
      a.quiet = true;
      continue;
    }
    if (opt == "--gradient-type") {
      if (i + 1 >= argc) return fail("option " + opt + " needs a value");
      try {
        a.gradient_type = omgs::parse_gradient_type(argv[++i]);
      } catch (const std::exception& e) {
        return fail(std::string("--gradient-type: ") + e.what());
      }
      continue;
    }
    struct Spec {
      const char* name;
      double lo, hi;
      bool integer;
      const char* what;
    };
    static const Spec specs[] = {
        {"--epochs", 1, 1e6, true, "an integer >= 1"},
        {"--batch", 1, 1e6, true, "an integer >= 1"},
        {"--hidden", 1, 65536, true, "an integer in [1, 65536]"},
        {"--classes", 2, 65536, true, "an integer in [2, 65536]"},
        {"--dim", 1, 65536, true, "an integer in [1, 65536]"},
        {"--samples", 1, 1e8, true, "an integer in [1, 1e8]"},
        {"--density", 0, 1, false, "a number in (0, 1]"},
        {"--lr", 0, 1e3, false, "a number in (0, 1000]"},
        {"--noise", 0, 1e3, false, "a number in [0, 1000]"},
        {"--tolerance", 0, 1e6, false, "a percentage >= 0"},
        {"--seed", 0, 4294967295.0, true, "an integer in [0, 2^32)"},
        {"--bucket-mb", 0, 2048, false, "a number of MB in (0, 2048]"},
        {"--collective-timeout", 1e-3, 1e6, false, "a number of seconds in (0, 1e6]"},
    };
    const Spec* spec = nullptr;
    for (const Spec& s : specs)
      if (opt == s.name) spec = &s;
    if (spec == nullptr) return fail("unknown option '" + opt + "'");
    if (i + 1 >= argc) return fail("option " + opt + " needs a value");
    const std::string text = argv[++i];
    double v = 0;
    const bool open_low = opt == "--density" || opt == "--lr" || opt == "--bucket-mb";
    if (!number(text, spec->lo, spec->hi, spec->integer, v) || (open_low && v <= 0))
      return fail(opt + " '" + text + "' must be " + spec->what);
    if (opt == "--epochs") a.epochs = static_cast<int>(v);
    if (opt == "--batch") a.batch = static_cast<int>(v);
    if (opt == "--hidden") a.hidden = static_cast<int>(v);
    if (opt == "--classes") a.classes = static_cast<int>(v);
    if (opt == "--dim") a.dim = static_cast<int>(v);
    if (opt == "--samples") a.samples = static_cast<int>(v);
    if (opt == "--density") a.density = v;
    if (opt == "--lr") a.lr = v;
    if (opt == "--noise") a.noise = v;
    if (opt == "--tolerance") a.tolerance_pct = v;
    if (opt == "--bucket-mb") a.bucket_mb = v;
    if (opt == "--seed") a.seed = static_cast<std::uint32_t>(v);
    if (opt == "--collective-timeout") omgs_examples::job_bound.timeout_s = v;
  }
  const double params = static_cast<double>(a.hidden) * (a.dim + a.hidden + a.classes + 2) +
                        static_cast<double>(a.classes);
  if (params > 2147483647.0)  // one MPI_Iallreduce count: a dense bucket may hold them all
    return fail("--dim, --hidden, --classes: the model would have " +
                std::to_string(static_cast<long long>(params)) + " parameters, more than 2^31 - 1");
  if (a.batch > a.samples)
    return fail("--batch " + std::to_string(a.batch) + " is larger than --samples " +
                std::to_string(a.samples));
  return -1;
}

}  // namespace omgs_train_mlp
