// Dense groups (Collective::dense, docs/planner.md): the group's gradient goes to the
// engine as it is, one MPI_Iallreduce (sum) into the aggregated buffer, posted in plan
// order with the sparse groups' allgathers; finish() averages it. No top-k, and the
// residual is not touched, unless the group fails: then this rank's gradient goes into
// its residual (when finite), as a failed sparse group's selection does.
#include <omgs/detail/kokkos_helpers.hpp>

#include "runtime/dense_kernels.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

void RuntimeImpl::send_dense(std::size_t g) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::dense"));
  const double cpu0 = begin_sparsify(g);
  detail::fence(exec());  // the gradient is complete before MPI reads it
  end_sparsify(g, cpu0);
  Kokkos::Profiling::popRegion();
  submit(g);
  current.bytes_sent += group_numel[g] * sizeof(float);
}

void RuntimeImpl::complete_dense(std::size_t g, WaitStatus w) {
  IterationStats& st = current;
  const std::size_t off = group_offset[g], n = group_numel[g];
  // Every rank holds the same sum, so every rank sees the same non-finite count.
  const int bad = w == WaitStatus::ok
                      ? kernels::count_nonfinite(exec(), agg, off, n, bad_blocks, bad_blocks_host)
                      : 0;
  if (w == WaitStatus::ok && bad == 0) {
    agg_start_s[g] = now_s();
    kernels::scale(exec(), agg, off, n, 1.0f / static_cast<float>(size));
    current.bytes_received += n * sizeof(float);
    agg_end_s[g] = now_s();
    current.aggregate_s += agg_end_s[g] - agg_start_s[g];
    return;
  }
  // Not applied: the aggregated slot is zero and a finite gradient of this rank goes to its
  // residual, so no gradient mass is lost.
  const int own_bad = kernels::count_nonfinite(exec(), grad, off, n, bad_blocks, bad_blocks_host);
  if (own_bad == 0) kernels::add_into(exec(), resid_of(g), grad, off, n);
  st.nonfinite += static_cast<std::uint64_t>(own_bad);
  fill_zero(exec(), Kokkos::subview(agg, group_range(g)));
  if (st.status != Status::ok) return;
  st.failed_group = static_cast<int>(g);
  if (w != WaitStatus::ok) {
    st.status = Status::comm_failed;
    last_error = "omgs: finish(): the allreduce of dense " + group_label(g) + " " +
                 collective_failure(w) + "; this rank's gradient was kept in its residual";
    return;
  }
  st.status = Status::nonfinite_gradient;
  last_error = "omgs: dense " + group_label(g) + " summed to " + std::to_string(bad) +
               " non-finite values (this rank's gradient has " + std::to_string(own_bad) +
               "); the step is skipped for it on every rank";
}

}  // namespace omgs::detail
