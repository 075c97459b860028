// omgs-train-mlp: real distributed training with omgs. A small MLP (D -> H -> H -> C, ReLU,
// softmax cross-entropy) learns a generated classification task three times from the same
// initial weights and the same data:
//
//   dense-bucket  data-parallel SGD as DDP/Horovod do it: the gradient fused into buckets
//                 (--bucket-mb, default 25 MB) filled in backward order, each MPI_Iallreduce'd
//                 as soon as it is full, overlapped with the rest of backward
//                 (examples/mlp_dense.hpp)
//   dense-layer   the same with one MPI_Iallreduce per tensor (timing; its loss should match)
//   sparse        top-k SGD with error feedback through omgs::Runtime: the backward pass
//                 writes each layer's gradient straight into rt.gradient(l) (Kokkos Kernels
//                 gemm into an unmanaged 2-D view over the runtime's buffer) and calls
//                 rt.ready(l) at once, so merged groups are sparsified and allgathered while
//                 backward continues; rt.finish() then hands back the averaged sparse
//                 gradient for SGD.
//
// It prints the training loss and held-out accuracy per epoch, the bytes each rank sends
// per iteration, the training time of each run with the allreduce it used, and a verdict:
// PASS when the sparse run's final training loss is within --tolerance of dense-bucket's
// (exit 0), FAIL otherwise (exit 1). It shows that sending ~5% of the gradient, with error
// feedback, trains as well as sending all of it.
//
//   mpiexec -n 4 omgs-train-mlp             # defaults: ~8 s on an idle 2-core VM (Serial)
//   mpiexec -n 2 omgs-train-mlp --epochs 3 --samples 1024   # CI-sized: ~1-3 s
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <omgs/omgs.hpp>

#include "bounded_mpi.hpp"
#include "mlp_args.hpp"
#include "mlp_dense.hpp"
#include "mlp_half.hpp"
#include "mlp_network.hpp"
#include "mlp_problem.hpp"

// Kernels live in a named namespace: nvcc does not allow extended (KOKKOS_LAMBDA) lambdas
// in functions with internal linkage.
namespace omgs_train_mlp {

/// MPI_Allreduce (sum) bounded by --collective-timeout (omgs_examples::job_bound): past it
/// the job is aborted.
void allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm,
               const char* what) {
  omgs_examples::allreduce_or_abort(send, recv, count, type, MPI_SUM, comm, what);
}

// ---------------------------------------------------------------------------------------
// Training
// ---------------------------------------------------------------------------------------

/// Thrown on a non-ok IterationStats status that every rank sees alike.
struct TrainingFailed {
  std::string message;
};

/// Mean training loss of the epoch over all ranks' samples.
double epoch_loss(const Problem& p) {
  double local[2] = {sum_of(p.sample_loss), static_cast<double>(p.sample_loss.extent(0))};
  double global[2] = {0, 0};
  allreduce(local, global, 2, MPI_DOUBLE, p.comm, "the epoch loss allreduce");
  return global[0] / global[1];
}

/// Accuracy on the evaluation set; each rank evaluates a slice of it (the weights are the
/// same everywhere).
double evaluate(const Problem& p, const Run& r) {
  const std::size_t dim = p.eval_x.extent(1), begin = p.eval_begin, count = p.eval_count;
  const ConstMatrixRef ex(p.eval_x.data() + begin * dim, count, dim);
  forward(r.params, p.shapes, ex, p.eval_act);
  const auto labels = Kokkos::subview(p.eval_y, std::make_pair(begin, begin + count));
  long correct = count_correct(p.eval_act.logits, labels);
  allreduce(MPI_IN_PLACE, &correct, 1, MPI_LONG, p.comm, "the accuracy allreduce");
  return static_cast<double>(correct) / static_cast<double>(p.eval_x.extent(0));
}

/// Returns the mean bytes this rank sent per iteration in this epoch. half: the 16-bit
/// gradients' scratch (--gradient-type bf16 / fp16), else null.
double sparse_epoch(const Problem& p, Run& r, omgs::Runtime& rt, const HalfGradients* half,
                    float lr, int epoch) {
  const double t0 = MPI_Wtime();
  std::uint64_t bytes = 0;
  omgs::Status bad = omgs::Status::ok;
  auto ready = [&rt, &bad, half](int t) {
    if (half != nullptr) half->store(rt, t);
    const omgs::Status st = rt.ready(static_cast<std::size_t>(t));
    if (st != omgs::Status::ok && bad == omgs::Status::ok) bad = st;
  };
  for (int it = 0; it < p.iters; ++it) {
    const ConstMatrixRef x = p.batch_x(it);
    const std::size_t at = static_cast<std::size_t>(it) * p.batch;
    forward(r.params, p.shapes, x, p.act);
    rt.begin_backward();
    softmax_xent(p.act.logits, p.y, at, p.sample_loss, at, 1.0f / p.batch);
    backward(r.params, p.shapes, x, p.act, r.grads, ready);
    const omgs::IterationStats st = rt.finish();
    if (bad != omgs::Status::ok || st.status != omgs::Status::ok) {
      const omgs::Status s = bad != omgs::Status::ok ? bad : st.status;
      const std::string msg = std::string("omgs-train-mlp: rank ") + std::to_string(rt.rank()) +
                              ": epoch " + std::to_string(epoch) + " iteration " +
                              std::to_string(it) + ": " + omgs::to_string(s) + ": " +
                              rt.last_error();
      // nonfinite_gradient and plan_failed are agreed by every rank: all stop here and exit
      // cleanly. Anything else may be this rank's alone: abort the job.
      if (s == omgs::Status::nonfinite_gradient || s == omgs::Status::plan_failed)
        throw TrainingFailed{msg};
      std::fprintf(stderr, "%s\n", msg.c_str());
      std::fflush(stderr);
      MPI_Abort(p.comm, 1);
    }
    bytes += st.bytes_sent;
    if (half != nullptr) half->load(rt);
    for (int t = 0; t < num_tensors; ++t) sgd(r.tensors[t], r.aggregated[t], lr);
  }
  Exec().fence();
  r.train_s += MPI_Wtime() - t0;
  return static_cast<double>(bytes) / p.iters;
}

/// This rank's shard of the generated task and the shared evaluation set: class centres
/// shared by every rank, samples drawn around them.
Problem make_problem(const Args& a, MPI_Comm comm, int rank, int size) {
  const Shapes shapes(a.dim, a.hidden, a.classes);
  const int iters = a.samples / a.batch;
  const int used = iters * a.batch;
  std::vector<float> centers(static_cast<std::size_t>(a.classes) * a.dim);
  {
    std::seed_seq seq{a.seed, 0u};
    Normal rng(seq);
    for (float& c : centers) c = center_scale * static_cast<float>(rng());
  }
  const int eval_per_rank = (eval_samples + size - 1) / size;
  const int eval_begin = std::min(rank * eval_per_rank, eval_samples);
  const int eval_count = std::min(eval_per_rank, eval_samples - eval_begin);
  Problem p{shapes,
            a.batch,
            iters,
            Matrix("mlp::x", used, a.dim),
            Matrix("mlp::eval_x", eval_samples, a.dim),
            Labels("mlp::y", used),
            Labels("mlp::eval_y", eval_samples),
            eval_begin,
            eval_count,
            Activations(a.batch, shapes),
            Activations(eval_count, shapes),
            Vec("mlp::sample_loss", used),
            comm,
            size};
  const auto noise = static_cast<float>(a.noise);
  std::seed_seq shard{a.seed, 1u, static_cast<std::uint32_t>(rank)};
  make_samples(centers, a.classes, a.dim, noise, used, shard, p.x, p.y);
  std::seed_seq eval{a.seed, 2u};
  make_samples(centers, a.classes, a.dim, noise, eval_samples, eval, p.eval_x, p.eval_y);
  return p;
}

void print_header(const Args& a, const Problem& p, const omgs::Runtime& rt) {
  const Shapes& shapes = p.shapes;
  std::printf("omgs-train-mlp: P = %d, MLP %d-%d-%d-%d (", p.size, a.dim, a.hidden, a.hidden,
              a.classes);
  for (int t = 0; t < num_tensors; ++t) {
    if (t % 2 == 0)
      std::printf("%s%s %dx%d", t ? ", " : "", Shapes::name(t), shapes.width[t / 2],
                  shapes.width[t / 2 + 1]);
    else
      std::printf(", %s %d", Shapes::name(t), shapes.width[t / 2 + 1]);
  }
  std::printf(
      "; %zu parameters), density %g, lr %g, batch %d/rank, %d samples/rank, %d "
      "iterations/epoch, calibration %.3f s, dense groups' allreduce %s, sparse run's "
      "gradients %s\n",
      shapes.total, a.density, a.lr, a.batch, p.iters * p.batch, p.iters,
      rt.calibration().duration_s, rt.calibration().dense_allreduce.describe().c_str(),
      std::string(omgs::to_string(rt.gradient_type())).c_str());
  std::fflush(stdout);
}

/// Largest relative difference of the dense runs' final losses that counts as agreement.
constexpr double dense_agreement = 1e-3;

/// The dense runs (bucketed, per tensor) and the sparse run of one job.
struct Runs {
  Run bucket, layer, sparse;
  std::string bucket_note, layer_note;  // the allreduce each dense run used
};

void print_summary(const Problem& p, const Runs& r, const omgs::Runtime& rt, double sparse_bytes) {
  const double dense_bytes = 4.0 * static_cast<double>(p.shapes.total);
  std::printf(
      "bytes sent per rank per iteration: dense %.0f (%zu floats allreduced), sparse %.0f "
      "(last epoch, IterationStats::bytes_sent), %.1fx less\n",
      dense_bytes, p.shapes.total, sparse_bytes, dense_bytes / sparse_bytes);
  std::printf("sparse plan: %zu groups (", rt.plan().groups.size());
  for (std::size_t g = 0; g < rt.plan().groups.size(); ++g) {
    const omgs::Group& gr = rt.plan().groups[g];
    std::printf("%s[", g ? " " : "");
    for (std::size_t l = gr.end; l-- > gr.begin;)
      std::printf("%s%s", Shapes::name(static_cast<int>(l)), l > gr.begin ? " " : "");
    std::printf("] k=%zu", rt.group_k(g));
  }
  std::printf(")\n");
  std::printf(
      "training time rank 0: dense-bucket %.2f s [%s], dense-layer %.2f s [%s], sparse %.2f "
      "s\n",
      r.bucket.train_s, r.bucket_note.c_str(), r.layer.train_s, r.layer_note.c_str(),
      r.sparse.train_s);
}

/// PASS when the sparse run's final loss is within --tolerance of dense-bucket's and the
/// two dense runs agree; rank 0 prints it. Every rank returns the same (the losses are
/// averages over all ranks).
bool verdict(const Args& a, const Runs& r, int rank, bool verbose) {
  const double dense = r.bucket.loss, sparse = r.sparse.loss;
  const double excess = (sparse - dense) / dense;
  // Bucketing changes the calls, not the sum: both dense runs train alike (up to the
  // rounding of sums in another order, which P = 2 does not have).
  const double gap = std::fabs(r.layer.loss - dense) / dense;
  const bool agree = gap <= dense_agreement;
  const bool pass = excess <= a.tolerance_pct / 100.0 && agree;
  if (rank == 0 && (verbose || !agree))
    std::printf(
        "dense check: dense-layer final loss %.4f, dense-bucket %.4f (relative difference "
        "%.2e, %s)\n",
        r.layer.loss, dense, gap, agree ? "agree" : "DIFFER");
  if (rank == 0) {
    if (!agree)
      std::printf(
          "FAIL: the dense runs' final losses differ by %.2e (relative), more than %g: a dense "
          "baseline is wrong\n",
          gap, dense_agreement);
    else if (pass)
      std::printf(
          "PASS: sparse loss within %g%% of dense-bucket (final epoch: sparse %.4f, "
          "dense-bucket %.4f, %+.2f%%)\n",
          a.tolerance_pct, sparse, dense, 100.0 * excess);
    else
      std::printf(
          "FAIL: sparse loss %.4f is %+.2f%% above dense-bucket %.4f (final epoch), more "
          "than the %g%% tolerance\n",
          sparse, 100.0 * excess, dense, a.tolerance_pct);
    std::fflush(stdout);
  }
  return pass;
}

int run(const Args& a, MPI_Comm comm, int rank, int size) {
  const bool verbose = rank == 0 && !a.quiet;
  Problem p = make_problem(a, comm, rank, size);
  const Shapes& shapes = p.shapes;

  // The sparse run's runtime: 6 tensors in forward order, backward times measured.
  std::vector<omgs::LayerSpec> layers;
  for (int t = 0; t < num_tensors; ++t)
    layers.push_back({Shapes::name(t), static_cast<std::uint64_t>(shapes.numel[t]), 0.0});
  omgs::RuntimeOptions opt;
  opt.density = a.density;
  opt.planner = omgs::Planner::mgs;
  opt.perf_model = "calibrate";
  opt.gradient_type = a.gradient_type;
  omgs::Runtime rt(comm, layers, opt);
  // The dense runs' exchanges (each times its allreduce variant now).
  omgs_examples::DenseExchange bucket_ex = make_exchange(comm, shapes, a.bucket_mb);
  omgs_examples::DenseExchange layer_ex = make_exchange(comm, shapes, 0.0);

  Runs r;
  r.bucket_note = describe(bucket_ex, a.bucket_mb);
  r.layer_note = describe(layer_ex, 0.0);
  init_run(r.bucket, "mlp::dense_bucket_params", shapes, a.seed);
  init_run(r.layer, "mlp::dense_layer_params", shapes, a.seed);
  init_run(r.sparse, "mlp::sparse_params", shapes, a.seed);
  attach(r.bucket, bucket_ex);
  attach(r.layer, layer_ex);
  HalfGradients half{a.gradient_type, {}, {}};
  if (a.gradient_type != omgs::GradientType::fp32)
    half.attach(r.sparse, shapes);
  else
    for (int t = 0; t < num_tensors; ++t) {
      r.sparse.grads[t] = rt.gradient(static_cast<std::size_t>(t));
      r.sparse.aggregated[t] = rt.aggregated(static_cast<std::size_t>(t));
    }
  const HalfGradients* half_in_use = a.gradient_type != omgs::GradientType::fp32 ? &half : nullptr;
  if (verbose) print_header(a, p, rt);

  const float lr = static_cast<float>(a.lr);
  double sparse_bytes = 0;
  for (int e = 1; e <= a.epochs; ++e) {
    dense_epoch(p, r.bucket, bucket_ex, lr);
    r.bucket.loss = epoch_loss(p);
    dense_epoch(p, r.layer, layer_ex, lr);
    r.layer.loss = epoch_loss(p);
    sparse_bytes = sparse_epoch(p, r.sparse, rt, half_in_use, lr, e);
    r.sparse.loss = epoch_loss(p);
    if (a.quiet) continue;
    r.bucket.eval_acc = evaluate(p, r.bucket);
    r.sparse.eval_acc = evaluate(p, r.sparse);
    if (verbose) {
      std::printf(
          "epoch  %d  dense_loss %.4f  sparse_loss %.4f  sparse/dense %.3f  eval_acc "
          "dense %.3f sparse %.3f\n",
          e, r.bucket.loss, r.sparse.loss, r.sparse.loss / r.bucket.loss, r.bucket.eval_acc,
          r.sparse.eval_acc);
      std::fflush(stdout);
    }
  }

  if (verbose) print_summary(p, r, rt, sparse_bytes);
  return verdict(a, r, rank, verbose) ? 0 : 1;
}

}  // namespace omgs_train_mlp

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  omgs_train_mlp::Args args;
  omgs_examples::job_bound.program = "omgs-train-mlp";
  int rc = omgs_train_mlp::parse_args(argc, argv, rank, args);
  if (rc < 0) {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      // The Runtime is destroyed when run() returns, before Kokkos and MPI are finalized.
      rc = omgs_train_mlp::run(args, MPI_COMM_WORLD, rank, size);
    } catch (const omgs::Error& e) {
      // Runtime's constructor throws alike on every rank (bad options, disagreeing ranks).
      if (rank == 0) std::fprintf(stderr, "omgs-train-mlp: %s\n", e.what());
      rc = 1;
    } catch (const omgs_train_mlp::TrainingFailed& f) {
      std::fprintf(stderr, "%s\n", f.message.c_str());
      rc = 1;
    }
  }
  return omgs_examples::finalize_bounded(rc);
}
