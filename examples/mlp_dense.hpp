// omgs-train-mlp's dense runs: data-parallel SGD whose gradient omgs_examples::DenseExchange
// (examples/dense_baseline.hpp, shared with omgs-train-synthetic) averages during the
// backward pass, as a PyTorch DDP or Horovod user has it:
//
//   dense-bucket  the tensors' gradients fused into buckets of --bucket-mb (default 25 MB),
//                 filled in backward order (b3 w3 b2 w2 b1 w1; the flat buffer holds them in
//                 forward order, so a bucket is one contiguous range); each bucket is
//                 MPI_Iallreduce'd as soon as its lowest tensor is written, while the rest of
//                 backward runs; all are complete before SGD.
//   dense-layer   one MPI_Iallreduce per tensor, posted as soon as it is written.
//
// In-place or separate send buffer: whichever a short start-up measurement finds faster.
// The exchange's own thread drives the allreduces (examples/bucket_progress.hpp). MPI works
// on the gradient itself in host memory, on a host copy of device memory (no GPU-aware MPI
// needed). Every wait is bounded by --collective-timeout (examples/bounded_mpi.hpp).
#pragma once

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dense_baseline.hpp"
#include "mlp_network.hpp"
#include "mlp_problem.hpp"

namespace omgs_train_mlp {

/// The exchange of a dense run over the MLP's tensors: buckets of bucket_mb MB (0: one per
/// tensor), the allreduce variant chosen by a start-up measurement. Collective.
inline omgs_examples::DenseExchange make_exchange(MPI_Comm comm, const Shapes& s,
                                                  double bucket_mb) {
  const std::vector<std::uint64_t> numel(s.numel.begin(), s.numel.end());
  return omgs_examples::make_dense_exchange(comm, numel, bucket_mb);
}

/// Points r's gradient slots at ex's buffer: backward writes the gradient there.
inline void attach(Run& r, const omgs_examples::DenseExchange& ex) {
  for (int t = 0; t < num_tensors; ++t) r.grads[t] = ex.gradient(static_cast<std::size_t>(t));
}

/// What a dense run calls, e.g. "25 MB buckets: 1 bucket, MPI_Iallreduce separate-buf (MPI's
/// auto)" or "6 x MPI_Iallreduce in-place (MPI's auto)" (bucket_mb 0).
inline std::string describe(const omgs_examples::DenseExchange& ex, double bucket_mb) {
  char head[64];
  const std::size_t n = ex.num_buckets();
  if (bucket_mb > 0)
    std::snprintf(head, sizeof head, "%g MB buckets: %zu bucket%s, ", bucket_mb, n,
                  n == 1 ? "" : "s");
  else
    std::snprintf(head, sizeof head, "%zu x ", n);
  return head + ex.variant().describe();
}

/// One epoch of dense SGD: per iteration forward, the loss, backward handing each tensor's
/// gradient to ex as soon as it is written, ex.finish() (the average over ranks), SGD.
inline void dense_epoch(const Problem& p, Run& r, omgs_examples::DenseExchange& ex, float lr) {
  const double t0 = MPI_Wtime();
  auto ready = [&ex](int t) { ex.ready(static_cast<std::size_t>(t)); };
  for (int it = 0; it < p.iters; ++it) {
    const ConstMatrixRef x = p.batch_x(it);
    const std::size_t at = static_cast<std::size_t>(it) * p.batch;
    forward(r.params, p.shapes, x, p.act);
    ex.begin();
    softmax_xent(p.act.logits, p.y, at, p.sample_loss, at, 1.0f / p.batch);
    backward(r.params, p.shapes, x, p.act, r.grads, ready);
    ex.finish();
    sgd(r.params, ex.flat(), lr);
  }
  Exec().fence();
  r.train_s += MPI_Wtime() - t0;
}

}  // namespace omgs_train_mlp
