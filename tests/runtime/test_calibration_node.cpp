// The two-level exchanges' calibration (src/runtime/calibration_node.cpp): the sparse
// node-summed exchange and the two-level dense allreduce timed at two sizes on the run's node
// shape, a fit every rank shares, and a calibrating runtime that allows sparse_node (or
// allreduce_node) whose model then has the "sparse_node" ("allreduce_node") line (one that
// does not allow it has no such line).
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include <omgs/runtime.hpp>

#include "calibration_fit_checks.hpp"
#include "omgs_catch.hpp"
#include "runtime/calibration_lines.hpp"

TEST_CASE("calibration: the sparse node-summed line, the same on every rank",
          "[runtime][calibration][sparse_node]") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rpn = size >= 2 ? 2 : 1;
  const omgs::detail::LinearFit fit =
      omgs::detail::fit_sparse_node(MPI_COMM_WORLD, rpn, 0.01, {1u << 12, 1u << 18}, 3);
  omgs_test::check_agreed_fit(fit);
  CHECK(fit.c0 + fit.c1 * 4.0 * double(1u << 18) > 0.0);  // an exchange takes time

  omgs::RuntimeOptions opt;
  opt.read_environment = false;
  opt.perf_model = "calibrate";
  opt.backward_times = omgs::BackwardTimes::given;
  opt.density = 0.01;
  opt.ranks_per_node = rpn;
  const std::vector<omgs::LayerSpec> layers = {{"a", 4096, 1e-4}, {"b", 100, 1e-5}};
  {
    omgs::Runtime flat(MPI_COMM_WORLD, layers, opt);
    CHECK_FALSE(flat.perf_model().knows_collective("sparse_node", size));
  }
  opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense,
                     omgs::Collective::sparse_node};
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  REQUIRE(rt.perf_model().knows_collective("sparse_node", size));
  CHECK(rt.perf_model().collective_s("sparse_node", 4096, size, 0.01) > 0.0);
}

TEST_CASE("calibration: the two-level allreduce's line, the same on every rank",
          "[runtime][calibration][allreduce_node]") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rpn = size >= 2 ? 2 : 1;
  const omgs::detail::LinearFit fit =
      omgs::detail::fit_allreduce_node(MPI_COMM_WORLD, rpn, {1u << 12, 1u << 18}, 3);
  omgs_test::check_agreed_fit(fit);
  CHECK(fit.c0 + fit.c1 * 4.0 * double(1u << 18) > 0.0);

  omgs::RuntimeOptions opt;
  opt.read_environment = false;
  opt.perf_model = "calibrate";
  opt.backward_times = omgs::BackwardTimes::given;
  opt.ranks_per_node = rpn;
  opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense,
                     omgs::Collective::sparse_node};
  const std::vector<omgs::LayerSpec> layers = {{"a", 4096, 1e-4}, {"b", 100, 1e-5}};
  {
    omgs::Runtime other(MPI_COMM_WORLD, layers, opt);
    CHECK_FALSE(other.perf_model().knows_collective("allreduce_node", size));
  }
  opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense,
                     omgs::Collective::allreduce_node};
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  REQUIRE(rt.perf_model().knows_collective("allreduce_node", size));
  CHECK_FALSE(rt.perf_model().knows_collective("sparse_node", size));
  CHECK(rt.perf_model().collective_s("allreduce_node", 4096, size, 0.001) > 0.0);
}
