// omgs-train-torch's command line (torch_args.hpp).
#include "torch_args.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include <omgs/error.hpp>
#include <omgs/runtime.hpp>

namespace omgs_train_torch {

namespace {

constexpr const char* usage_text =
    "usage: mpiexec -n P omgs-train-torch [options]\n"
    "Trains a CNN on Fashion-MNIST with dense (MPI_Allreduce) and with sparse (omgs)\n"
    "gradient averaging from the same initial weights; PASS if the sparse final test\n"
    "accuracy is within the tolerance of dense (exit 0), else FAIL (exit 1); 2: bad options.\n"
    "  --model NAME      cnn (80,202 parameters) or wide_cnn (3.2 M, communication-bound on\n"
    "                    1 Gbit/s links) (default cnn)\n"
    "  --epochs N        passes over the training set (default 3)\n"
    "  --batch-size B    global batch, split evenly over the ranks (default 64)\n"
    "  --density D       fraction of each merged group sent, in (0, 1] (default 0.01)\n"
    "  --planner NAME    any omgs planner: mgs, layerwise, single, threshold, optimal,\n"
    "                    automatic, mixed (the runtime's default; dense groups allowed)\n"
    "                    (default mgs: this example checks top-k's accuracy)\n"
    "  --lr LR           SGD learning rate, both runs (default 0.05)\n"
    "  --momentum M      SGD momentum, both runs, in [0, 1) (default 0)\n"
    "  --momentum-correction\n"
    "                    the sparse run's momentum in omgs (DGC's momentum correction with\n"
    "                    factor masking) and plain SGD in its optimizer; without it the sparse\n"
    "                    run's optimizer applies the momentum to the aggregated gradient\n"
    "  --warmup-epochs E sparse run: the density falls from --warmup-density to --density in\n"
    "                    4 exponential stages over the first E epochs (default 0: off)\n"
    "  --warmup-density D0  the warm-up's first density (default 0.25)\n"
    "  --clip C          sparse run: each rank clips each layer's gradient to an L2 norm of\n"
    "                    C / sqrt(P) (DGC's local clipping; default 0: off)\n"
    "  --pair-wire W     sparse run: the allgather's pair wire, pairs8 (8-byte pairs), fp32,\n"
    "                    bf16 or fp16 (the compact pair format; docs/api.md) (default: the\n"
    "                    runtime's, bf16 unless OMGS_PAIR_WIRE says otherwise)\n"
    "  --data-dir DIR    IDX files, gzip'd or not (default /usr/share/datasets/fashion-mnist)\n"
    "  --max-batches N   at most N batches per epoch, 0: all (default 0)\n"
    "  --test-images N   the test accuracy on the first N of the 10,000 test images\n"
    "                    (default 10000)\n"
    "  --tolerance T     allowed accuracy loss of sparse, in percentage points (default 1)\n"
    "  --progress MODE   thread: omgs' progress thread drives MPI during backward; inline:\n"
    "                    finish() does (default thread)\n"
    "  --seed S          weights and shuffling (default 1)\n"
    "  --save-gradients PATH  write every rank's gradients of the dense run's first\n"
    "                    --save-iterations iterations to PATH (examples/gradient_file.hpp),\n"
    "                    for omgs-bench-sparse-allreduce --source file:PATH\n"
    "  --save-iterations N  (default 4)\n"
    "  --csv PATH        rank 0 writes method,seed,epoch,train_s,test_acc per epoch and\n"
    "                    method to PATH (train_s: training wall time so far, evaluation\n"
    "                    excluded)\n";

}  // namespace

ModelShape model_shape(const std::string& name) {
  // Fashion-MNIST's images are 28 x 28: 24 -> 12 -> 8 -> 4. wide_cnn is cnn with a 48x
  // wider hidden layer: fc1 holds 97% of its parameters and costs about one multiply-add per
  // parameter and sample, the convolutions about 1 M per sample (docs/torch.md).
  if (name == "cnn") return {name, 16, 32, 5, 0, 128};
  if (name == "wide_cnn") return {name, 16, 32, 5, 0, 6144};
  throw omgs::Error("unknown model '" + name + "' (cnn, wide_cnn)");
}

int parse_args(int argc, char** argv, int rank, int size, Args& a) {
  auto fail = [rank](const std::string& m) {
    if (rank == 0) std::fprintf(stderr, "omgs-train-torch: error: %s (see --help)\n", m.c_str());
    return 2;
  };
  auto number = [](const std::string& t, double lo, double hi, double& v) {
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    return !t.empty() && *end == '\0' && std::isfinite(v) && v >= lo && v <= hi;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    if (o.rfind("--kokkos-", 0) == 0) continue;
    if (o == "--help" || o == "-h") {
      if (rank == 0) std::printf("%s", usage_text);
      return 0;
    }
    if (o == "--momentum-correction") {
      a.momentum_correction = true;
      continue;
    }
    if (i + 1 >= argc) return fail("unknown option or missing value: '" + o + "'");
    const std::string t = argv[++i];
    double v = 0;
    auto integer = [&](double lo, double hi, auto& out) {
      if (!number(t, lo, hi, v) || v != std::floor(v)) return false;
      out = static_cast<std::remove_reference_t<decltype(out)>>(v);
      return true;
    };
    bool ok = true;
    if (o == "--epochs")
      ok = integer(1, 1000, a.epochs);
    else if (o == "--batch-size")
      ok = integer(1, 60000, a.batch);
    else if (o == "--max-batches")
      ok = integer(0, 1e9, a.max_batches);
    else if (o == "--test-images")
      ok = integer(1, 1e9, a.test_images);
    else if (o == "--seed")
      ok = integer(0, 1e9, a.seed);
    else if (o == "--density")
      ok = number(t, 1e-9, 1, a.density);
    else if (o == "--lr")
      ok = number(t, 1e-9, 100, a.lr);
    else if (o == "--momentum")
      ok = number(t, 0, 0.999999, a.momentum);
    else if (o == "--warmup-epochs")
      ok = integer(0, 1000, a.warmup_epochs);
    else if (o == "--warmup-density")
      ok = number(t, 1e-9, 1, a.warmup_density);
    else if (o == "--clip")
      ok = number(t, 0, 1e9, a.clip);
    else if (o == "--tolerance")
      ok = number(t, 0, 100, a.tolerance);
    else if (o == "--data-dir")
      a.data_dir = t;
    else if (o == "--save-gradients")
      a.save_gradients = t;
    else if (o == "--csv")
      a.csv = t;
    else if (o == "--save-iterations")
      ok = integer(1, 1000, a.save_iterations);
    else if (o == "--progress")
      ok = (a.inline_progress = t == "inline") || t == "thread";
    else if (o == "--model") {
      try {
        a.model = model_shape(t);
      } catch (const omgs::Error& e) {
        return fail(std::string("--model: ") + e.what());
      }
    } else if (o == "--planner") {
      try {
        a.planner = omgs::parse_planner(t);
      } catch (const omgs::Error& e) {
        return fail(std::string("--planner: ") + e.what());
      }
    } else if (o == "--pair-wire") {
      try {
        (void)omgs::parse_pair_wire(t);
      } catch (const omgs::Error& e) {
        return fail(std::string("--pair-wire: ") + e.what());
      }
      a.pair_wire = t;
    } else
      return fail("unknown option '" + o + "'");
    if (!ok) return fail(o + " '" + t + "' is not valid (see the range in --help)");
  }
  // OMGS_PAIR_WIRE wins over RuntimeOptions::pair_wire: the option would be ignored.
  if (!a.pair_wire.empty() && std::getenv("OMGS_PAIR_WIRE") != nullptr)
    return fail("--pair-wire and OMGS_PAIR_WIRE are both set (the variable would win)");
  if (a.momentum_correction && a.momentum == 0)
    return fail("--momentum-correction needs --momentum M > 0");
  if (a.warmup_epochs > 0 && a.warmup_density < a.density)
    return fail("--warmup-density must be at least --density");
  if (a.batch % size != 0)
    return fail("--batch-size " + std::to_string(a.batch) + " must be a multiple of the " +
                std::to_string(size) + " ranks");
  return -1;
}

}  // namespace omgs_train_torch
