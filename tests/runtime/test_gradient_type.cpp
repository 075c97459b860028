// RuntimeOptions::gradient_type on 1, 2 and 4 ranks, for every exchange (the sparse
// allgather, the sparse allreduce, the dense allreduce): bf16 / fp16 gradients give the fp32
// path's aggregate on the same (16-bit) values, and the 16-bit aggregate is that aggregate
// rounded to the type; gradient mass is conserved in fp32 over several iterations (what was
// fed = P x the fp32 aggregates + the residuals); a NaN / Inf in a 16-bit gradient fails the
// group on every rank as in fp32, healthy ranks keep their gradient in the residual; views
// of the wrong type or length, bad values and ranks that disagree are refused.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omgs/detail/pair_format_values.hpp>
#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs::GradientType;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;
namespace pairs = omgs::detail::pairs;

namespace {

std::vector<omgs::LayerSpec> layers() {
  return {{"big", 60000, 1e-4}, {"mid", 20000, 1e-4}, {"small", 900, 1e-4}};
}

struct Exchange {
  const char* name;
  omgs::Planner planner;
  omgs::SparseExchange sparse;
};
const Exchange exchanges[] = {
    {"sparse allgather", omgs::Planner::layerwise, omgs::SparseExchange::allgather},
    {"sparse allreduce", omgs::Planner::layerwise, omgs::SparseExchange::allreduce},
    {"dense allreduce", omgs::Planner::dense, omgs::SparseExchange::allgather}};

/// An alpha-beta model for any P (the reference one knows P = 2 .. 16 only).
std::string model_path() {
  static const std::string path = omgs_test::write_on_rank0(
      "omgs_test_gradient_type_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
          "allgather": [], "allgather_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9},
          "allreduce_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}})");
  return path;
}

omgs::RuntimeOptions options(GradientType type, const Exchange& ex) {
  omgs::RuntimeOptions opt;
  opt.density = 0.01;
  opt.perf_model = model_path();
  opt.planner = ex.planner;
  opt.sparse_exchange = ex.sparse;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  opt.gradient_type = type;
  // The dense groups in fp32, the path compared here with fp32 gradients (their 16-bit form,
  // the default for 16-bit gradients, is test_dense_wire.cpp's).
  opt.dense_wire = omgs::DenseWire::fp32;
  return opt;
}

/// v rounded to the 16-bit type as the runtime rounds (fp32: v).
float rounded(GradientType type, float v) {
  if (type == GradientType::bf16) return pairs::from_bf16(pairs::to_bf16(v));
  if (type == GradientType::fp16) return pairs::from_fp16(pairs::to_fp16(v));
  return v;
}

/// What rank r feeds: values of mixed scale, representable in `type`.
float value(GradientType type, int rank, int it, std::size_t l, std::size_t i) {
  return rounded(type,
                 std::sin(0.37f * float(i) + 1.3f * float(rank) + 0.7f * float(it) + float(l)) *
                     (1.0f + float(i % 97)));
}

template <class T>
void write16(const Kokkos::View<T*, omgs::DeviceMemory>& dst, const std::vector<float>& src) {
  auto h = Kokkos::create_mirror_view(dst);
  for (std::size_t i = 0; i < src.size(); ++i) h(i) = T(src[i]);
  Kokkos::deep_copy(dst, h);
}

template <class T>
std::vector<float> read16(const Kokkos::View<const T*, omgs::DeviceMemory>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<float> out(h.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(h(i));
  return out;
}

/// Writes the gradient of layer l in the runtime's type.
void write_gradient(omgs::Runtime& rt, std::size_t l, const std::vector<float>& g) {
  switch (rt.gradient_type()) {
    case GradientType::fp32:
      return omgs_test::copy_to(rt.gradient(l), g);
    case GradientType::bf16:
      return write16(rt.gradient_bf16(l), g);
    case GradientType::fp16:
      return write16(rt.gradient_fp16(l), g);
  }
}

std::vector<float> aggregated16(const omgs::Runtime& rt, std::size_t l) {
  return rt.gradient_type() == GradientType::bf16 ? read16<omgs::bf16_t>(rt.aggregated_bf16(l))
                                                  : read16<omgs::fp16_t>(rt.aggregated_fp16(l));
}

void step(omgs::Runtime& rt, GradientType values, int it) {
  for (std::size_t l = 0; l < rt.layers().size(); ++l) {
    std::vector<float> g(rt.layers()[l].numel);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(values, world_rank(), it, l, i);
    write_gradient(rt, l, g);
  }
  for (std::size_t l = rt.layers().size(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
}

using Aggregates = std::vector<std::vector<std::vector<float>>>;  // [it][l][i], fp32

/// `iterations` steps of gradients of type `type` holding values of type `values`; checks
/// the 16-bit aggregate against the fp32 one and conservation; returns the fp32 aggregates.
Aggregates run(GradientType type, GradientType values, const Exchange& ex, int iterations) {
  auto holder = std::make_unique<omgs::Runtime>(MPI_COMM_WORLD, layers(), options(type, ex));
  omgs::Runtime& rt = *holder;
  REQUIRE(rt.gradient_type() == type);
  const int P = world_size();
  const std::size_t L = rt.layers().size();
  std::vector<std::vector<double>> fed(L), applied(L);
  for (std::size_t l = 0; l < L; ++l) {
    fed[l].assign(rt.layers()[l].numel, 0.0);
    applied[l].assign(rt.layers()[l].numel, 0.0);
  }
  Aggregates out;
  for (int it = 0; it < iterations; ++it) {
    step(rt, values, it);
    REQUIRE(rt.finish().status == omgs::Status::ok);
    out.emplace_back(L);
    for (std::size_t l = 0; l < L; ++l) {
      std::vector<float>& agg = out.back()[l];
      agg = to_host(rt.aggregated(l));
      std::size_t wrong = 0;
      if (type != GradientType::fp32) {
        const std::vector<float> a16 = aggregated16(rt, l);
        for (std::size_t i = 0; i < agg.size(); ++i)
          wrong += a16[i] != rounded(type, agg[i]);  // the fp32 aggregate, rounded
      }
      INFO(ex.name << " " << omgs::to_string(type) << " it " << it << " layer " << l);
      CHECK(wrong == 0);
      for (std::size_t i = 0; i < agg.size(); ++i) {
        for (int r = 0; r < P; ++r) fed[l][i] += value(values, r, it, l, i);
        applied[l][i] += double(P) * agg[i];
      }
    }
  }
  std::vector<std::vector<double>> held(L);
  for (std::size_t l = 0; l < L; ++l) {
    const auto res = to_host(rt.residual(l));
    held[l].assign(res.begin(), res.end());
  }
  holder.reset();  // the progress thread joined before this test's own MPI calls
  for (std::size_t l = 0; l < L; ++l) {
    MPI_Allreduce(MPI_IN_PLACE, held[l].data(), int(held[l].size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < held[l].size(); ++i)
      bad +=
          std::fabs(fed[l][i] - applied[l][i] - held[l][i]) > 1e-4 * (1.0 + std::fabs(fed[l][i]));
    INFO(ex.name << " " << omgs::to_string(type) << " layer " << l << ": mass conserved");
    CHECK(bad == 0);
  }
  return out;
}

}  // namespace

TEST_CASE("gradient type: bf16 / fp16 give the fp32 path's aggregate, rounded; mass conserved",
          "[runtime][gradient_type]") {
  for (const Exchange& ex : exchanges)
    for (GradientType type : {GradientType::bf16, GradientType::fp16}) {
      // The fp32 path on the same values: the widening is exact, so the same computation.
      const Aggregates ref = run(GradientType::fp32, type, ex, 3);
      const Aggregates got = run(type, type, ex, 3);
      std::size_t differ = 0;
      for (std::size_t it = 0; it < ref.size(); ++it)
        for (std::size_t l = 0; l < ref[it].size(); ++l)
          for (std::size_t i = 0; i < ref[it][l].size(); ++i)
            differ += std::fabs(got[it][l][i] - ref[it][l][i]) >
                      1e-6f * (1.0f + std::fabs(ref[it][l][i]));
      INFO(ex.name << " " << omgs::to_string(type));
      CHECK(differ == 0);
    }
}

TEST_CASE("gradient type: a NaN / Inf 16-bit gradient fails the group on every rank",
          "[runtime][gradient_type]") {
  for (const Exchange& ex : exchanges)
    for (GradientType type : {GradientType::bf16, GradientType::fp16}) {
      INFO(ex.name << " " << omgs::to_string(type));
      omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(type, ex));
      step(rt, type, 0);
      REQUIRE(rt.finish().status == omgs::Status::ok);
      const std::vector<float> before = to_host(rt.residual(0));
      std::vector<float> grad(rt.layers()[0].numel);
      for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = value(type, world_rank(), 1, 0, i);
      const bool poisoned = world_rank() == world_size() - 1;
      if (poisoned)
        grad[5] = type == GradientType::bf16 ? std::numeric_limits<float>::quiet_NaN()
                                             : -std::numeric_limits<float>::infinity();
      for (std::size_t l = rt.layers().size(); l-- > 1;) {
        write_gradient(rt, l, std::vector<float>(rt.layers()[l].numel, 0.5f));
        REQUIRE(rt.ready(l) == omgs::Status::ok);
      }
      write_gradient(rt, 0, grad);
      REQUIRE(rt.ready(0) == omgs::Status::ok);
      const omgs::IterationStats st = rt.finish();
      CHECK(st.status == omgs::Status::nonfinite_gradient);
      const std::vector<float> agg = aggregated16(rt, 0), res = to_host(rt.residual(0));
      std::size_t bad = 0;
      for (std::size_t i = 0; i < agg.size(); ++i) {
        bad += agg[i] != 0.0f;
        // A healthy rank keeps its whole gradient (sparse: with the residual it had, bitwise;
        // the values sent came back) in its residual; the poisoned rank's is as it was.
        bad += res[i] != (poisoned ? before[i] : before[i] + grad[i]);
      }
      CHECK(bad == 0);
      step(rt, type, 2);  // training goes on
      CHECK(rt.finish().status == omgs::Status::ok);
    }
}

TEST_CASE("gradient type: views of another type or length are refused",
          "[runtime][gradient_type]") {
  const Exchange& ex = exchanges[0];
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(GradientType::bf16, ex));
  CHECK_THROWS_WITH(rt.gradient(0), Catch::Contains("gradient_bf16"));
  CHECK_THROWS_WITH(rt.gradient_fp16(0), Catch::Contains("is bf16, not fp16"));
  CHECK_THROWS_WITH(rt.aggregated_fp16(0), Catch::Contains("is bf16, not fp16"));
  CHECK_THROWS_WITH(rt.gradient_bf16(3), Catch::Contains("layer 3 does not exist"));
  const std::size_t n = rt.layers()[2].numel;
  CHECK(rt.ready(2, omgs::Fp16GradientView("fp16", n)) == omgs::Status::shape_mismatch);
  CHECK_THAT(rt.last_error(), Catch::Contains("a fp16 view, but the gradient type is bf16"));
  CHECK(rt.ready(2, omgs::GradientView("fp32", n)) == omgs::Status::shape_mismatch);
  CHECK(rt.ready(2, omgs::Bf16GradientView("short", n - 1)) == omgs::Status::shape_mismatch);
  // The right view: copied in, the layer is ready.
  const omgs::Bf16GradientView mine("mine", n);
  write16(mine, std::vector<float>(n, 0.25f));
  for (std::size_t l = 2; l > 0; --l) {
    const std::size_t m = rt.layers()[l].numel;
    write16(rt.gradient_bf16(l), std::vector<float>(m, 0.25f));
  }
  CHECK(rt.ready(2, mine) == omgs::Status::ok);
  CHECK(rt.ready(1) == omgs::Status::ok);
  write16(rt.gradient_bf16(0), std::vector<float>(rt.layers()[0].numel, 0.25f));
  CHECK(rt.ready(0) == omgs::Status::ok);
  REQUIRE(rt.finish().status == omgs::Status::ok);
  // Every rank fed 0.25 everywhere: the small layer (k >= 1) applies some 0.25 entries.
  const std::vector<float> agg = read16<omgs::bf16_t>(rt.aggregated_bf16(2));
  std::size_t applied = 0;
  for (float a : agg) applied += a == 0.25f;
  CHECK(applied >= 1);
  omgs::Runtime rt32(MPI_COMM_WORLD, layers(), options(GradientType::fp32, ex));
  CHECK_THROWS_WITH(rt32.gradient_bf16(0), Catch::Contains("is fp32, not bf16"));
  CHECK(rt32.ready(0, omgs::Bf16GradientView("bf16", rt32.layers()[0].numel)) ==
        omgs::Status::shape_mismatch);
}

TEST_CASE("gradient type: bad values and disagreement are refused on every rank",
          "[runtime][gradient_type]") {
  CHECK_THROWS_WITH(omgs::parse_gradient_type("half"), Catch::Contains("'half'"));
  for (GradientType t : {GradientType::fp32, GradientType::bf16, GradientType::fp16})
    CHECK(omgs::parse_gradient_type(omgs::to_string(t)) == t);
  omgs::RuntimeOptions bad = options(GradientType::fp32, exchanges[0]);
  bad.gradient_type = static_cast<GradientType>(7);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), bad),
                    Catch::Contains("gradient_type has an unknown value (7)"));
  // One rank's bad value: every rank throws (the others naming that rank).
  if (world_rank() > 0) bad.gradient_type = GradientType::bf16;
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), bad),
                    Catch::Contains(world_rank() == 0 ? "unknown value" : "rank 0"));
  if (world_size() > 1) {
    const GradientType mine = world_rank() == 0 ? GradientType::bf16 : GradientType::fp32;
    CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), options(mine, exchanges[0])),
                      Catch::Contains("option gradient_type"));
  }
}
