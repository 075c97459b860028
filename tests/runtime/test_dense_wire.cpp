// RuntimeOptions::dense_wire on 1, 2 and 4 ranks (issue 46): fp32 gradients with bf16 / fp16
// dense groups send half the bytes, apply 16-bit means, and keep every rounding error in the
// residuals (over iterations the gradients fed = P x the applied aggregates + the residuals:
// mass conserved); bf16 / fp16 gradients send their type by default (automatic) and fp32 when
// asked; the model counts 2 bytes per element, also after a refit; OMGS_DENSE_WIRE wins; bad
// values and ranks that disagree are refused on every rank.
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <omgs/detail/pair_format_values.hpp>
#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs::DenseWire;
using omgs::GradientType;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;
namespace pairs = omgs::detail::pairs;

namespace {

std::vector<omgs::LayerSpec> layers() {
  return {{"big", 30001, 1e-4}, {"small", 900, 1e-4}};
}

omgs::RuntimeOptions options(GradientType type, DenseWire wire) {
  static const std::string path = omgs_test::write_on_rank0(
      "omgs_test_dense_wire_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
          "allgather": [], "allgather_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9},
          "allreduce_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}})");
  omgs::RuntimeOptions opt;
  opt.density = 0.01;
  opt.perf_model = path;
  opt.planner = omgs::Planner::dense;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  opt.gradient_type = type;
  opt.dense_wire = wire;
  return opt;
}

float round16(bool brain, float v) {
  return brain ? pairs::from_bf16(pairs::to_bf16(v)) : pairs::from_fp16(pairs::to_fp16(v));
}

// Values of mixed scale; for 16-bit gradients rounded to the type (what the user holds).
float value(GradientType type, int rank, int it, std::size_t i) {
  const float v = std::sin(0.37f * float(i) + 1.3f * float(rank) + 0.7f * float(it)) *
                  (1.0f + float(i % 97)) * 0.01f;
  return type == GradientType::fp32 ? v : round16(type == GradientType::bf16, v);
}

void write(omgs::Runtime& rt, std::size_t l, const std::vector<float>& g) {
  if (rt.gradient_type() == GradientType::fp32) return omgs_test::copy_to(rt.gradient(l), g);
  auto write16 = [&](auto view) {
    auto h = Kokkos::create_mirror_view(view);
    using T = typename decltype(view)::non_const_value_type;
    for (std::size_t i = 0; i < g.size(); ++i) h(i) = T(g[i]);
    Kokkos::deep_copy(view, h);
  };
  if (rt.gradient_type() == GradientType::bf16)
    write16(rt.gradient_bf16(l));
  else
    write16(rt.gradient_fp16(l));
}

/// `iterations` steps; checks the bytes sent, the 16-bit aggregates (when `sent16` is
/// bf16 / fp16) and conservation of mass.
void run(omgs::RuntimeOptions opt, DenseWire sent16, int iterations) {
  auto holder = std::make_unique<omgs::Runtime>(MPI_COMM_WORLD, layers(), opt);
  omgs::Runtime& rt = *holder;
  const int P = world_size();
  const std::size_t L = rt.layers().size();
  const bool wire16 = sent16 != DenseWire::fp32, brain = sent16 == DenseWire::bf16;
  const auto* ab = rt.perf_model().as_alpha_beta();
  REQUIRE(ab != nullptr);
  CHECK(ab->allreduce_element_bytes() == (wire16 ? 2.0 : 4.0));
  std::vector<std::vector<double>> fed(L), applied(L);
  std::size_t total = 0;
  for (std::size_t l = 0; l < L; ++l) {
    fed[l].assign(rt.layers()[l].numel, 0.0);
    applied[l].assign(rt.layers()[l].numel, 0.0);
    total += rt.layers()[l].numel;
  }
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t l = L; l-- > 0;) {
      std::vector<float> g(rt.layers()[l].numel);
      for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = value(opt.gradient_type, world_rank(), it, i);
      write(rt, l, g);
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    const omgs::IterationStats st = rt.finish();
    REQUIRE(st.status == omgs::Status::ok);
    CHECK(st.bytes_sent == total * (wire16 ? 2u : 4u));
    std::size_t not16 = 0;
    for (std::size_t l = 0; l < L; ++l) {
      const std::vector<float> agg = to_host(rt.aggregated(l));
      for (std::size_t i = 0; i < agg.size(); ++i) {
        not16 += wire16 && round16(brain, agg[i]) != agg[i];
        for (int r = 0; r < P; ++r) fed[l][i] += value(opt.gradient_type, r, it, i);
        applied[l][i] += double(P) * agg[i];
      }
    }
    CHECK(not16 == 0);
  }
  std::vector<std::vector<double>> held(L);
  for (std::size_t l = 0; l < L; ++l) {
    const std::vector<float> res = to_host(rt.residual(l));
    held[l].assign(res.begin(), res.end());
  }
  if (opt.max_replans == 0) {  // the refit keeps the form's bytes
    REQUIRE(!rt.last_refit().model.empty());
    CHECK((rt.last_refit().model.find("allreduce of 2 bytes") != std::string::npos) == wire16);
  }
  holder.reset();  // the progress thread joined before this test's own MPI calls
  std::size_t lost = 0, residual_used = 0;
  for (std::size_t l = 0; l < L; ++l) {
    MPI_Allreduce(MPI_IN_PLACE, held[l].data(), int(held[l].size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    for (std::size_t i = 0; i < held[l].size(); ++i) {
      lost +=
          std::fabs(fed[l][i] - applied[l][i] - held[l][i]) > 1e-5 * (1.0 + std::fabs(fed[l][i]));
      residual_used += held[l][i] != 0.0;
    }
  }
  CHECK(lost == 0);
  // fp32 values rounded to 16 bits leave errors in the residual; 16-bit values that the
  // form sends as they are (and the fp32 form) leave none but the means' roundings.
  if (wire16 && opt.gradient_type == GradientType::fp32) CHECK(residual_used > 0);
  if (!wire16) CHECK(residual_used == 0);
}

}  // namespace

TEST_CASE("dense wire: fp32 gradients sent in 16 bits keep the rounding in the residual",
          "[runtime][dense_wire]") {
  for (DenseWire w : {DenseWire::bf16, DenseWire::fp16}) {
    INFO(omgs::to_string(w));
    omgs::RuntimeOptions opt = options(GradientType::fp32, w);
    opt.refit_iterations = 2;  // a refit within the run, which keeps the all-dense plan
    opt.max_replans = 0;
    run(opt, w, 4);
  }
  run(options(GradientType::fp32, DenseWire::automatic), DenseWire::fp32, 2);
}

TEST_CASE("dense wire: 16-bit gradients send their type unless told fp32",
          "[runtime][dense_wire]") {
  run(options(GradientType::bf16, DenseWire::automatic), DenseWire::bf16, 3);
  run(options(GradientType::fp16, DenseWire::automatic), DenseWire::fp16, 3);
  run(options(GradientType::bf16, DenseWire::fp32), DenseWire::fp32, 2);
}

TEST_CASE("dense wire: OMGS_DENSE_WIRE wins; bad values and disagreement are refused",
          "[runtime][dense_wire]") {
  omgs::RuntimeOptions opt = options(GradientType::fp32, DenseWire::fp32);
  opt.read_environment = true;
  ::setenv("OMGS_DENSE_WIRE", "bf16", 1);
  run(opt, DenseWire::bf16, 1);
  ::setenv("OMGS_DENSE_WIRE", "bf17", 1);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), opt),
                    Catch::Contains("OMGS_DENSE_WIRE 'bf17' is not automatic, fp32, bf16 or fp16"));
  ::unsetenv("OMGS_DENSE_WIRE");
  omgs::RuntimeOptions bad = options(GradientType::fp32, static_cast<DenseWire>(9));
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), bad),
                    Catch::Contains("dense_wire has an unknown value (9)"));
  if (world_size() > 1) {
    const DenseWire mine = world_rank() == 0 ? DenseWire::bf16 : DenseWire::automatic;
    CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), options(GradientType::fp32, mine)),
                      Catch::Contains("option dense_wire"));
  }
}
