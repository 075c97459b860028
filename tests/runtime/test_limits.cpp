// Sizes the runtime cannot serve fail at construction, on every rank, with a message that
// names the group or the memory needed, before any allocation is attempted.
#include <mpi.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"

TEST_CASE("a group beyond 32-bit indices is named; a model beyond memory is refused",
          "[runtime][limits]") {
  // 64 layers of 2^32 - 1 elements: each fits the index type, together 3.3 TB of buffers.
  std::vector<omgs::LayerSpec> huge;
  for (int i = 0; i < 64; ++i)
    huge.push_back({"w" + std::to_string(i), (std::uint64_t{1} << 32) - 1, 1e-3});
  omgs::RuntimeOptions opt;
  opt.perf_model = "calibrate";
  // A fixed dense form: choosing one times allreduces of the groups' size (16 Mi floats),
  // which the refusals below do not need (a minute under TSan).
  opt.dense_allreduce = omgs::DenseAllreduce::nonblocking;
  opt.planner = omgs::Planner::single;
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, huge, opt),
                    Catch::Contains("more than 32-bit indices address") &&
                        Catch::Contains("group 0 (layers 'w63' .. 'w0')"));
  if (std::is_same<omgs::DeviceMemory, Kokkos::HostSpace>::value) {
    // The planners that group (the default's candidates, MGS) keep every group within the
    // indices (PlanConfig::max_group_numel): what refuses is the memory, as for layerwise.
    for (omgs::Planner p : {omgs::Planner::layerwise, omgs::Planner::mgs, omgs::default_planner}) {
      INFO(omgs::to_string(p));
      opt.planner = p;
      CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, huge, opt),
                        Catch::Contains("more than its physical memory"));
    }
  }
}

TEST_CASE("the memory check counts every rank on the node", "[runtime][limits]") {
  if (!std::is_same<omgs::DeviceMemory, Kokkos::HostSpace>::value) return;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int on_node = 1;
  MPI_Comm_size(node, &on_node);
  MPI_Comm_free(&node);
  if (on_node < 2) return;  // one rank per node: the per-rank check above covers it
  // Buffers of about 3/4 of physical memory per rank: one rank would fit, two do not. The
  // check refuses before allocating anything.
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  // 16 bytes per element: gradient, two residual buffers, aggregated.
  const auto numel = static_cast<std::uint64_t>(0.75 * physical / 16.0 / 16.0);
  std::vector<omgs::LayerSpec> layers;
  for (int i = 0; i < 16; ++i) layers.push_back({"w" + std::to_string(i), numel, 1e-3});
  omgs::RuntimeOptions opt;
  opt.perf_model = "reference";
  opt.dense_allreduce = omgs::DenseAllreduce::nonblocking;  // no timing of 16 Mi floats
  opt.planner = omgs::Planner::layerwise;
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, opt),
                    Catch::Contains("ranks on this node: more than its physical memory"));
}

TEST_CASE("density so small that k would be 0 sends one entry per group", "[runtime][limits]") {
  omgs::RuntimeOptions opt;
  opt.perf_model = "calibrate";
  opt.density = 1e-12;
  opt.planner = omgs::Planner::layerwise;
  omgs::Runtime rt(MPI_COMM_WORLD, {{"a", 100, 1e-4}, {"b", 7, 1e-4}}, opt);
  CHECK(rt.group_k(0) == 1);
  CHECK(rt.group_k(1) == 1);
  REQUIRE(rt.ready(1) == omgs::Status::ok);
  REQUIRE(rt.ready(0) == omgs::Status::ok);
  CHECK(rt.finish().status == omgs::Status::ok);
}
