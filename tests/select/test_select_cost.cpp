// The GPU top-k cost model's count (include/omgs/detail/select_cost.hpp, docs/scale.md) is
// the code's: one call of the one-read feedback form on the sampled path launches exactly
// the passes listed in select_one_read_passes, in that order. A pass added to the kernels
// without being listed (with the bytes it moves) fails here, so the model cannot silently
// fall behind the kernels.
#include <omgs/detail/select_cost.hpp>

#include <string>
#include <vector>

#include "select_reference.hpp"

using namespace select_test;

namespace {

std::vector<std::string>* launches = nullptr;  // the callback's sink while recording

void record_launch(const char* name, std::uint32_t, std::uint64_t* id) {
  if (launches != nullptr) launches->emplace_back(name);
  *id = 0;
}

/// The labels of the kernels `f` launches (Kokkos Tools' parallel_for callback).
template <class F>
std::vector<std::string> kernels_of(const F& f) {
  std::vector<std::string> names;
  launches = &names;
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(record_launch);
  f();
  Exec().fence();
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  launches = nullptr;
  return names;
}

}  // namespace

TEST_CASE("select cost: the one-read form launches the listed passes", "[select][cost]") {
  const std::size_t n = std::size_t(1) << 20, k = n / 1000;
  const std::vector<float> grad = make_data(Dist::normal, n, 7);
  const std::vector<float> residual = make_data(Dist::normal, n, 8);
  const FloatView dg = to_device(grad, "grad");
  const FloatView din = to_device(residual, "residual_in");
  FloatView dout("residual_out", n);
  IndexView oi("oi", k);
  FloatView ov("ov", k);
  Selector sel(n, k);
  const std::vector<std::string> seen =
      kernels_of([&] { REQUIRE(sel.select_with_feedback(dg, din, dout, k, oi, ov).ok()); });
  REQUIRE(sel.last_path() == omgs::TopkPath::sampled);
  std::vector<std::string> listed;
  for (const omgs::detail::SelectPassCost& p : omgs::detail::select_one_read_passes)
    listed.emplace_back(p.label);
  CHECK(seen == listed);
  CHECK(omgs::detail::select_one_read_launches() == 5);
  // One full read of grad and residual_in, one full write of residual_out: 12 bytes per
  // entry, the figure docs/scale.md and examples/perf/gpu_topk_*.json divide by bandwidth.
  CHECK(omgs::detail::select_one_read_bytes_per_entry() == 12.0);
}
