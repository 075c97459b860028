// omgs-train-mlp: real distributed training with omgs. A small MLP (D -> H -> H -> C, ReLU,
// softmax cross-entropy) learns a generated classification task twice from the same
// initial weights and the same data:
//
//   dense   plain data-parallel SGD: the full gradient is averaged with one MPI_Allreduce
//   sparse  top-k SGD with error feedback through omgs::Runtime: the backward pass writes
//           each layer's gradient straight into rt.gradient(l) (Kokkos Kernels gemm into an
//           unmanaged 2-D view over the runtime's buffer) and calls rt.ready(l) at once, so
//           merged groups are sparsified and allgathered while backward continues;
//           rt.finish() then hands back the averaged sparse gradient for SGD.
//
// It prints the training loss and held-out accuracy of both per epoch, the bytes each rank
// sends per iteration, and a verdict: PASS when the sparse run's final training loss is
// within --tolerance of the dense run's (exit 0), FAIL otherwise (exit 1). It shows that
// sending ~5% of the gradient, with error feedback, trains as well as sending all of it.
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
#include "mlp_network.hpp"

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

/// The data and buffers shared by both runs.
struct Problem {
  Shapes shapes;
  int batch, iters;  // iterations per epoch: samples / batch (the rest is not used)
  Matrix x, eval_x;  // this rank's shard, the shared evaluation set
  Labels y, eval_y;
  int eval_begin, eval_count;  // the rows of the evaluation set this rank evaluates
  Activations act, eval_act;
  Vec sample_loss;  // per sample of this epoch
  MPI_Comm comm;
  int size;

  ConstMatrixRef batch_x(int it) const {
    return ConstMatrixRef(x.data() + static_cast<std::size_t>(it) * batch * x.extent(1), batch,
                          x.extent(1));
  }
};

/// One method's state: its parameters and gradient slots.
struct Run {
  Vec params;
  std::array<omgs::GradientView, num_tensors> grads;
  std::array<omgs::ConstGradientView, num_tensors> aggregated;  // sparse run
  std::array<Vec, num_tensors> tensors;                         // slices of params
  double train_s = 0;
  double loss = 0;
  double eval_acc = 0;
};

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

/// flat_grad: every tensor's gradient slot; host_grad: its host mirror (the same memory
/// when the device memory is host-accessible).
void dense_epoch(const Problem& p, Run& r, const Vec& flat_grad, const Vec::HostMirror& host_grad,
                 float lr) {
  constexpr bool host_ok = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible;
  const double t0 = MPI_Wtime();
  auto no_op = [](int) {};
  for (int it = 0; it < p.iters; ++it) {
    const ConstMatrixRef x = p.batch_x(it);
    const std::size_t at = static_cast<std::size_t>(it) * p.batch;
    forward(r.params, p.shapes, x, p.act);
    softmax_xent(p.act.logits, p.y, at, p.sample_loss, at, 1.0f / p.batch);
    backward(r.params, p.shapes, x, p.act, r.grads, no_op);
    Exec().fence();
    if constexpr (host_ok) {
      allreduce(MPI_IN_PLACE, flat_grad.data(), static_cast<int>(flat_grad.extent(0)), MPI_FLOAT,
                p.comm, "the dense gradient allreduce");
    } else {
      Kokkos::deep_copy(host_grad, flat_grad);
      allreduce(MPI_IN_PLACE, host_grad.data(), static_cast<int>(host_grad.extent(0)), MPI_FLOAT,
                p.comm, "the dense gradient allreduce");
      Kokkos::deep_copy(flat_grad, host_grad);
    }
    sgd(r.params, flat_grad, lr / static_cast<float>(p.size));
  }
  Exec().fence();
  r.train_s += MPI_Wtime() - t0;
}

/// Returns the mean bytes this rank sent per iteration in this epoch.
double sparse_epoch(const Problem& p, Run& r, omgs::Runtime& rt, float lr, int epoch) {
  const double t0 = MPI_Wtime();
  std::uint64_t bytes = 0;
  omgs::Status bad = omgs::Status::ok;
  auto ready = [&rt, &bad](int t) {
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
    for (int t = 0; t < num_tensors; ++t) sgd(r.tensors[t], r.aggregated[t], lr);
  }
  Exec().fence();
  r.train_s += MPI_Wtime() - t0;
  return static_cast<double>(bytes) / p.iters;
}

int run(const Args& a, MPI_Comm comm, int rank, int size) {
  const bool verbose = rank == 0 && !a.quiet;
  Shapes shapes(a.dim, a.hidden, a.classes);
  const int iters = a.samples / a.batch;
  const int used = iters * a.batch;

  // Data: class centres shared by every rank, a shard per rank, a shared evaluation set.
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
  {
    const auto noise = static_cast<float>(a.noise);
    std::seed_seq shard{a.seed, 1u, static_cast<std::uint32_t>(rank)};
    make_samples(centers, a.classes, a.dim, noise, used, shard, p.x, p.y);
    std::seed_seq eval{a.seed, 2u};
    make_samples(centers, a.classes, a.dim, noise, eval_samples, eval, p.eval_x, p.eval_y);
  }

  // The sparse run's runtime: 6 tensors in forward order, backward times measured.
  std::vector<omgs::LayerSpec> layers;
  for (int t = 0; t < num_tensors; ++t)
    layers.push_back({Shapes::name(t), static_cast<std::uint64_t>(shapes.numel[t]), 0.0});
  omgs::RuntimeOptions opt;
  opt.density = a.density;
  opt.planner = omgs::Planner::mgs;
  opt.perf_model = "calibrate";
  omgs::Runtime rt(comm, layers, opt);

  Run dense, sparse;
  Vec dense_flat_grad("mlp::dense_grad", shapes.total);
  const Vec::HostMirror dense_host_grad = Kokkos::create_mirror_view(dense_flat_grad);
  for (Run* r : {&dense, &sparse}) {
    r->params =
        Vec(std::string(r == &dense ? "mlp::dense_params" : "mlp::sparse_params"), shapes.total);
    init_params(r->params, shapes, a.seed);
    for (int t = 0; t < num_tensors; ++t) {
      const auto range = std::make_pair(shapes.offset[t], shapes.offset[t] + shapes.numel[t]);
      r->tensors[t] = Kokkos::subview(r->params, range);
      if (r == &dense) {
        r->grads[t] = Kokkos::subview(dense_flat_grad, range);
      } else {
        r->grads[t] = rt.gradient(static_cast<std::size_t>(t));
        r->aggregated[t] = rt.aggregated(static_cast<std::size_t>(t));
      }
    }
  }

  if (verbose) {
    std::printf("omgs-train-mlp: P = %d, MLP %d-%d-%d-%d (", size, a.dim, a.hidden, a.hidden,
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
        "iterations/epoch, calibration %.3f s\n",
        shapes.total, a.density, a.lr, a.batch, used, iters, rt.calibration().duration_s);
    std::fflush(stdout);
  }

  const float lr = static_cast<float>(a.lr);
  double sparse_bytes = 0;
  for (int e = 1; e <= a.epochs; ++e) {
    dense_epoch(p, dense, dense_flat_grad, dense_host_grad, lr);
    dense.loss = epoch_loss(p);
    sparse_bytes = sparse_epoch(p, sparse, rt, lr, e);
    sparse.loss = epoch_loss(p);
    if (a.quiet) continue;
    dense.eval_acc = evaluate(p, dense);
    sparse.eval_acc = evaluate(p, sparse);
    if (verbose) {
      std::printf(
          "epoch  %d  dense_loss %.4f  sparse_loss %.4f  sparse/dense %.3f  eval_acc "
          "dense %.3f sparse %.3f\n",
          e, dense.loss, sparse.loss, sparse.loss / dense.loss, dense.eval_acc, sparse.eval_acc);
      std::fflush(stdout);
    }
  }

  const double excess = (sparse.loss - dense.loss) / dense.loss;
  const bool pass = excess <= a.tolerance_pct / 100.0;
  if (rank == 0) {
    if (verbose) {
      const double dense_bytes = 4.0 * static_cast<double>(shapes.total);
      std::printf(
          "bytes sent per rank per iteration: dense %.0f (MPI_Allreduce of %zu floats), "
          "sparse %.0f (last epoch, IterationStats::bytes_sent), %.1fx less\n",
          dense_bytes, shapes.total, sparse_bytes, dense_bytes / sparse_bytes);
      std::printf("sparse plan: %zu groups (", rt.plan().groups.size());
      for (std::size_t g = 0; g < rt.plan().groups.size(); ++g) {
        const omgs::Group& gr = rt.plan().groups[g];
        std::printf("%s[", g ? " " : "");
        for (std::size_t l = gr.end; l-- > gr.begin;)
          std::printf("%s%s", Shapes::name(static_cast<int>(l)), l > gr.begin ? " " : "");
        std::printf("] k=%zu", rt.group_k(g));
      }
      std::printf("); training time rank 0: dense %.2f s, sparse %.2f s\n", dense.train_s,
                  sparse.train_s);
    }
    if (pass)
      std::printf(
          "PASS: sparse loss within %g%% of dense (final epoch: sparse %.4f, dense "
          "%.4f, %+.2f%%)\n",
          a.tolerance_pct, sparse.loss, dense.loss, 100.0 * excess);
    else
      std::printf(
          "FAIL: sparse loss %.4f is %+.2f%% above dense %.4f (final epoch), more than "
          "the %g%% tolerance\n",
          sparse.loss, 100.0 * excess, dense.loss, a.tolerance_pct);
    std::fflush(stdout);
  }
  return pass ? 0 : 1;
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
