// The dense groups' allreduce form (RuntimeOptions::dense_allreduce, issue 37), on 1, 2 and
// 4 ranks: choose_allreduce_form takes the same choice on every rank; a forced blocking
// MPI_Allreduce and a forced MPI_Iallreduce give bit-identical aggregated gradients (sums of
// exactly representable values) that conserve the gradient's mass; automatic agrees across
// ranks and calibration times the form chosen; a disagreeing option fails on every rank
// naming it; a stalled blocking group is named by the watchdog.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs::AllreduceForm;
using omgs::DenseAllreduce;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

constexpr double blocking_margin = 0.10;  // choose_allreduce_form's (docs/api.md)

std::vector<omgs::LayerSpec> layers() {
  return {{"a", 5000, 1e-4}, {"b", 300, 1e-4}, {"c", 40000, 1e-4}, {"d", 17, 1e-4}};
}

omgs::RuntimeOptions options(DenseAllreduce form) {
  omgs::RuntimeOptions opt;
  opt.planner = omgs::Planner::dense;
  opt.perf_model = "calibrate";
  opt.backward_times = omgs::BackwardTimes::given;
  opt.dense_allreduce = form;
  return opt;
}

// Multiples of 1/4 in [-2, 2]: every partial sum over up to 4 ranks is exact, in any order.
float value(int rank, int it, std::size_t l, std::size_t i) {
  return 0.25f *
         static_cast<float>(
             static_cast<int>((i * 7 + l * 3 + static_cast<std::size_t>(rank * 5 + it * 11)) % 17) -
             8);
}

/// Two iterations; the aggregated gradient of every layer, [it][l][i].
std::vector<std::vector<std::vector<float>>> run(omgs::Runtime& rt) {
  std::vector<std::vector<std::vector<float>>> out;
  for (int it = 0; it < 2; ++it) {
    for (std::size_t l = rt.layers().size(); l-- > 0;) {
      std::vector<float> g(rt.layers()[l].numel);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(world_rank(), it, l, i);
      omgs_test::copy_to(rt.gradient(l), g);
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    const omgs::IterationStats st = rt.finish();
    REQUIRE(st.status == omgs::Status::ok);
    out.emplace_back();
    for (std::size_t l = 0; l < rt.layers().size(); ++l) {
      out.back().push_back(to_host(rt.aggregated(l)));
      // Mass: the aggregate is the exact mean, and nothing stays in the residual.
      const std::vector<float> a = out.back().back(), r = to_host(rt.residual(l));
      for (std::size_t i = 0; i < a.size(); ++i) {
        float sum = 0;
        for (int q = 0; q < world_size(); ++q) sum += value(q, it, l, i);
        REQUIRE(a[i] == sum / static_cast<float>(world_size()));
        REQUIRE(r[i] == 0.0f);
      }
    }
  }
  return out;
}

/// The same int on every rank.
bool same_everywhere(int x) {
  int mx = 0, mn = 0;
  MPI_Allreduce(&x, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &mn, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return mx == mn;
}

}  // namespace

TEST_CASE("choose_allreduce_form: every rank takes the same choice, from rank 0's medians") {
  const std::vector<AllreduceForm> all = {AllreduceForm::nonblocking_in_place,
                                          AllreduceForm::nonblocking, AllreduceForm::blocking};
  const omgs::AllreduceFormChoice c = omgs::choose_allreduce_form(MPI_COMM_WORLD, 20000, 2, all);
  REQUIRE(same_everywhere(static_cast<int>(c.form)));
  REQUIRE(c.numel == 20000);
  for (double m : c.median_s) {
    REQUIRE(m > 0);
    double mx = 0;
    MPI_Allreduce(&m, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    REQUIRE(mx == m);
  }
  // The fastest non-blocking candidate (a form, or MPI_Iallreduce under an MPI_T setting),
  // unless the blocking form beats it by more than blocking_margin.
  double nb = std::numeric_limits<double>::infinity();
  for (std::size_t f = 0; f < omgs::allreduce_forms; ++f)
    if (f != static_cast<std::size_t>(AllreduceForm::blocking)) nb = std::min(nb, c.median_s[f]);
  for (double m : c.setting_median_s)
    if (!std::isnan(m)) nb = std::min(nb, m);
  const double blocking = c.median_s[static_cast<std::size_t>(AllreduceForm::blocking)];
  if (c.form == AllreduceForm::blocking) {
    REQUIRE(blocking * (1 + blocking_margin) < nb);
  } else {
    REQUIRE((c.setting >= 0 ? c.setting_median_s[static_cast<std::size_t>(c.setting)]
                            : c.median_s[static_cast<std::size_t>(c.form)]) == nb);
    REQUIRE(nb <= blocking * (1 + blocking_margin));
  }
  REQUIRE(c.describe().find(std::string(omgs::to_string(c.form))) == 0);
  // A form only some ranks offer is timed by none.
  const omgs::AllreduceFormChoice one = omgs::choose_allreduce_form(
      MPI_COMM_WORLD, 100, 1,
      world_rank() == 0 ? all : std::vector<AllreduceForm>{AllreduceForm::nonblocking});
  if (world_size() > 1) {
    REQUIRE(one.form == AllreduceForm::nonblocking);
    REQUIRE(std::isnan(one.median_s[static_cast<std::size_t>(AllreduceForm::blocking)]));
  }
  REQUIRE_THROWS_WITH(omgs::choose_allreduce_form(MPI_COMM_WORLD, 100, 1, {}),
                      Catch::Contains("no form"));
  REQUIRE(omgs::parse_dense_allreduce("blocking") == DenseAllreduce::blocking);
  REQUIRE_THROWS_WITH(omgs::parse_dense_allreduce("sometimes"),
                      Catch::Contains("unknown dense allreduce 'sometimes'"));
}

TEST_CASE("dense_allreduce: blocking and nonblocking give bit-identical means; automatic agrees") {
  std::vector<std::vector<std::vector<float>>> agg[3];
  const DenseAllreduce forms[] = {DenseAllreduce::nonblocking, DenseAllreduce::blocking,
                                  DenseAllreduce::automatic};
  for (int f = 0; f < 3; ++f) {
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(forms[f]));
    REQUIRE(rt.plan().dense_groups() == rt.plan().groups.size());
    const omgs::AllreduceFormChoice& c = rt.calibration().dense_allreduce;
    if (forms[f] == DenseAllreduce::automatic) {
      REQUIRE(same_everywhere(static_cast<int>(c.form)));
      REQUIRE(c.median_s[static_cast<std::size_t>(AllreduceForm::nonblocking)] > 0);
      REQUIRE(c.median_s[static_cast<std::size_t>(AllreduceForm::blocking)] > 0);
    } else {
      REQUIRE(c.form == (forms[f] == DenseAllreduce::blocking ? AllreduceForm::blocking
                                                              : AllreduceForm::nonblocking));
      REQUIRE(std::isnan(c.median_s[0]));
    }
    REQUIRE(rt.calibration().allreduce_s.size() == 5);
    agg[f] = run(rt);
  }
  REQUIRE(agg[0] == agg[1]);
  REQUIRE(agg[0] == agg[2]);
}

TEST_CASE("dense_allreduce: a disagreement fails on every rank, naming the option") {
  if (world_size() < 2) return;
  const DenseAllreduce mine =
      world_rank() == 0 ? DenseAllreduce::nonblocking : DenseAllreduce::blocking;
  REQUIRE_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), options(mine)),
                      Catch::Contains("dense_allreduce"));
}

TEST_CASE("dense_allreduce: blocking needs the progress thread") {
  omgs::RuntimeOptions opt = options(DenseAllreduce::blocking);
  opt.force_inline_progress = true;
  REQUIRE_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), opt),
                      Catch::Contains("dense_allreduce = blocking needs"));
  opt.dense_allreduce = DenseAllreduce::automatic;  // inline: the nonblocking form, unmeasured
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  REQUIRE(rt.calibration().dense_allreduce.form == AllreduceForm::nonblocking);
  run(rt);
}

TEST_CASE("dense_allreduce: the watchdog names a group stalled in a blocking MPI_Allreduce") {
  if (world_size() < 2) return;
  omgs::RuntimeOptions opt = options(DenseAllreduce::blocking);
  opt.wait_timeout_s = 1.0;
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  // Rank 1 comes late: rank 0's progress thread blocks in the first group's allreduce.
  if (world_rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
  for (std::size_t l = rt.layers().size(); l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
  omgs::IterationStats st = rt.finish();
  if (world_rank() != 1) {  // the others' progress threads wait for rank 1 in MPI_Allreduce
    REQUIRE(st.status == omgs::Status::comm_failed);
    REQUIRE_THAT(rt.last_diagnosis().report, Catch::Contains("dense_allreduce = blocking") &&
                                                 Catch::Contains("blocked in group"));
  }
  // Retried, finish() completes once rank 1 has arrived.
  for (int i = 0; i < 30 && st.status == omgs::Status::comm_failed; ++i) st = rt.finish();
  REQUIRE(st.status == omgs::Status::ok);
}

TEST_CASE("describe_allreduce_setting names the environment's algorithm") {
  REQUIRE(omgs::apply_allreduce_setting(-1));  // none through MPI_T (an earlier choice's)
  const char* old = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  const std::string saved = old ? old : "";
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 1);
  CHECK(omgs::describe_allreduce_setting() == "libnbc alg 1=ring");
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "7", 1);
  CHECK(omgs::describe_allreduce_setting() == "libnbc alg 7");
  unsetenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  if (!std::getenv("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM"))
    CHECK(omgs::describe_allreduce_setting() == "MPI's auto");
  if (old) setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", saved.c_str(), 1);
}
