// The allreduce settings written through MPI_T control variables (issue 37), on 1, 2 and 4
// ranks: the chooser times a setting only where every rank can write it and applies the
// same choice on every rank; a setting written and put back reads back through MPI_T; the
// runtime's dense groups under each writable setting conserve the gradient's mass and give
// the same means as the blocking MPI_Allreduce; a bad setting index is refused everywhere.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs::AllreduceForm;
using omgs::DenseAllreduce;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

bool same_everywhere(double x) {
  double mx = 0, mn = 0;
  MPI_Allreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return mx == mn || (std::isnan(mx) && std::isnan(mn));
}

/// The cvar's value read through MPI_T by the test itself; -1 where it is missing.
int read_cvar(const char* name) {
  int level = MPI_THREAD_SINGLE, provided = 0, n = 0, value = -1;
  MPI_Query_thread(&level);  // kept: Open MPI's MPI_T_init_thread resets it to the one asked
  MPI_T_init_thread(level, &provided);
  MPI_T_cvar_get_num(&n);
  for (int i = 0; i < n; ++i) {
    char cname[256], desc[8];
    int nl = sizeof cname, dl = sizeof desc, verbosity = 0, bind = 0, scope = 0, count = 0;
    MPI_Datatype type;
    MPI_T_enum e;
    MPI_T_cvar_get_info(i, cname, &nl, &verbosity, &type, &e, desc, &dl, &bind, &scope);
    if (std::strcmp(cname, name) != 0) continue;
    MPI_T_cvar_handle h;
    MPI_T_cvar_handle_alloc(i, nullptr, &h, &count);
    MPI_T_cvar_read(h, &value);
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return value;
}

std::vector<omgs::LayerSpec> layers() {
  return {{"a", 5000, 1e-4}, {"b", 300, 1e-4}, {"c", 40000, 1e-4}, {"d", 17, 1e-4}};
}

// Multiples of 1/4 in [-2, 2]: every partial sum over up to 4 ranks is exact, in any order.
float value(int rank, std::size_t l, std::size_t i) {
  return 0.25f *
         static_cast<float>(
             static_cast<int>((i * 7 + l * 3 + static_cast<std::size_t>(rank * 5)) % 17) - 8);
}

/// One iteration of a dense plan; every aggregate must be the exact mean, no residual left.
std::vector<std::vector<float>> run_once(omgs::Runtime& rt) {
  for (std::size_t l = rt.layers().size(); l-- > 0;) {
    std::vector<float> g(rt.layers()[l].numel);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(world_rank(), l, i);
    omgs_test::copy_to(rt.gradient(l), g);
    REQUIRE(rt.ready(l) == omgs::Status::ok);
  }
  REQUIRE(rt.finish().status == omgs::Status::ok);
  std::vector<std::vector<float>> out;
  for (std::size_t l = 0; l < rt.layers().size(); ++l) {
    out.push_back(omgs_test::to_host(rt.aggregated(l)));
    const std::vector<float> r = omgs_test::to_host(rt.residual(l));
    for (std::size_t i = 0; i < out.back().size(); ++i) {
      float sum = 0;
      for (int q = 0; q < world_size(); ++q) sum += value(q, l, i);
      REQUIRE(out.back()[i] == sum / static_cast<float>(world_size()));
      REQUIRE(r[i] == 0.0f);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("allreduce settings: write, read back through MPI_T, put back") {
  int before = MPI_THREAD_SINGLE, after = MPI_THREAD_SINGLE;
  MPI_Query_thread(&before);
  (void)omgs::writable_allreduce_settings();
  MPI_Query_thread(&after);
  REQUIRE(after == before);  // omgs' MPI_T use leaves MPI's thread level alone
  const std::vector<omgs::AllreduceSetting>& table = omgs::allreduce_settings();
  REQUIRE(!table.empty());
  REQUIRE_FALSE(omgs::apply_allreduce_setting(static_cast<int>(table.size())));
  REQUIRE_FALSE(omgs::apply_allreduce_setting(-2));
  REQUIRE(omgs::apply_allreduce_setting(-1));
  REQUIRE(omgs::applied_allreduce_setting() == -1);
  for (int s : omgs::writable_allreduce_settings()) {
    const omgs::AllreduceSetting& a = table[static_cast<std::size_t>(s)];
    const std::string cvar(a.cvar);
    const int old = read_cvar(cvar.c_str());
    REQUIRE(omgs::apply_allreduce_setting(s));
    REQUIRE(omgs::applied_allreduce_setting() == s);
    REQUIRE(read_cvar(cvar.c_str()) == a.value);
    REQUIRE(omgs::describe_allreduce_setting() == std::string(a.label) + " (MPI_T)");
    REQUIRE(omgs::apply_allreduce_setting(-1));
    REQUIRE(read_cvar(cvar.c_str()) == old);
  }
}

TEST_CASE("allreduce settings: the chooser times only what every rank can write, agrees") {
  const std::vector<AllreduceForm> forms = {AllreduceForm::nonblocking, AllreduceForm::blocking};
  const omgs::AllreduceFormChoice c = omgs::choose_allreduce_form(MPI_COMM_WORLD, 20000, 2, forms);
  REQUIRE(same_everywhere(c.setting));
  REQUIRE(same_everywhere(static_cast<int>(c.form)));
  REQUIRE(omgs::applied_allreduce_setting() == c.setting);
  const std::vector<int> mine = omgs::writable_allreduce_settings();
  REQUIRE(c.setting_median_s.size() == omgs::allreduce_settings().size());
  for (std::size_t s = 0; s < c.setting_median_s.size(); ++s) {
    REQUIRE(same_everywhere(c.setting_median_s[s]));
    // Timed only where every rank can write it (here every rank runs the same MPI).
    const bool writable = std::find(mine.begin(), mine.end(), static_cast<int>(s)) != mine.end();
    REQUIRE(std::isnan(c.setting_median_s[s]) == !writable);
  }
  if (c.setting >= 0) {
    REQUIRE(c.form == AllreduceForm::nonblocking);
    REQUIRE(c.setting_median_s[static_cast<std::size_t>(c.setting)] <=
            c.median_s[static_cast<std::size_t>(AllreduceForm::nonblocking)]);
    REQUIRE(c.name().find("(MPI_T)") != std::string::npos);
  }
  // A rank that leaves the settings out: none is timed, none applied, on every rank.
  const omgs::AllreduceFormChoice one =
      omgs::choose_allreduce_form(MPI_COMM_WORLD, 1000, 1, forms, world_rank() != 0);
  REQUIRE(one.setting == -1);
  REQUIRE(omgs::applied_allreduce_setting() == -1);
  for (double m : one.setting_median_s) REQUIRE(std::isnan(m));
}

TEST_CASE("allreduce settings: dense groups under each setting conserve mass, as blocking") {
  omgs::RuntimeOptions opt;
  opt.planner = omgs::Planner::dense;
  opt.perf_model = "calibrate";
  opt.backward_times = omgs::BackwardTimes::given;
  opt.dense_allreduce = DenseAllreduce::blocking;
  REQUIRE(omgs::apply_allreduce_setting(-1));
  std::vector<std::vector<float>> reference;
  {
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    reference = run_once(rt);
  }
  opt.dense_allreduce = DenseAllreduce::nonblocking;
  for (int s : omgs::writable_allreduce_settings()) {
    REQUIRE(omgs::apply_allreduce_setting(s));
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    REQUIRE(rt.calibration().dense_allreduce.setting == s);  // forced form: the setting kept
    REQUIRE(run_once(rt) == reference);
  }
  REQUIRE(omgs::apply_allreduce_setting(-1));
}
