// The runtime's measurements: backward times measured from ready() spacing (profiling,
// then one replan), the measured timeline, the Chrome trace, the SVG chart, and the
// OMGS_* environment variables (checked on every rank).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "../../src/plan/json.hpp"
#include "comm/environment.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"
#include "sparse_options.hpp"

using omgs_test::count_of;
using omgs_test::fill_gradient;
using omgs_test::read_file;
using omgs_test::spin_for;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> untimed_layers() {
  // backward_s = 0 everywhere: BackwardTimes::automatic measures them.
  return {{"embed", 4000, 0.0}, {"conv1", 1500, 0.0},    {"bn1", 32, 0.0},
          {"conv2", 6000, 0.0}, {"fc.weight", 900, 0.0}, {"fc.bias", 10, 0.0}};
}

// The emulated backward time of layer l, seconds.
double emulated_s(std::size_t l) {
  return 0.002 * static_cast<double>(l + 1);
}

/// One iteration: begin_backward, then each layer's "compute" then ready(l). With
/// `longest`, each layer's longest wall-clock span so far that contains whatever the
/// runtime can time for it (from before the previous ready() call, or before
/// begin_backward(), to after its own ready() returned): a bound that holds under any load.
omgs::IterationStats run_iteration(omgs::Runtime& rt, std::mt19937& rng, bool mark_begin,
                                   std::vector<double>* longest = nullptr) {
  std::vector<float> g;
  double previous = MPI_Wtime();
  if (mark_begin) rt.begin_backward();
  for (std::size_t l = rt.num_layers(); l-- > 0;) {
    spin_for(emulated_s(l));
    fill_gradient(rt, l, rng, g);
    const double before = MPI_Wtime();
    REQUIRE(rt.ready(l) == omgs::Status::ok);
    const double after = MPI_Wtime();
    if (longest != nullptr && (mark_begin || l + 1 != rt.num_layers()))
      (*longest)[l] = std::max((*longest)[l], after - previous);
    previous = before;
  }
  return rt.finish();
}

struct EnvGuard {
  std::string name;
  EnvGuard(const std::string& n, const std::string& value, bool set) : name(n) {
    if (set) setenv(n.c_str(), value.c_str(), 1);
  }
  ~EnvGuard() { unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("backward times are measured from ready() spacing, then the plan is rebuilt",
          "[runtime][profile]") {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 0.01;
  opt.perf_model = "calibrate";
  opt.profile_iterations = 3;
  omgs::Runtime rt(MPI_COMM_WORLD, untimed_layers(), opt);
  const std::size_t L = rt.num_layers();
  CHECK(rt.profiling());
  CHECK(rt.plan().planner == omgs::Planner::layerwise);
  CHECK(rt.plan().groups.size() == L);
  std::mt19937 rng(7 + world_rank());
  std::vector<double> longest(L, 0.0);
  for (int it = 0; it < 3; ++it) {
    const omgs::IterationStats st = run_iteration(rt, rng, /*mark_begin=*/it != 1, &longest);
    REQUIRE(st.status == omgs::Status::ok);
    CHECK(st.profiling);
    CHECK(st.replanned == (it == 2));
  }
  CHECK_FALSE(rt.profiling());
  CHECK(rt.plan().planner == omgs::Planner::mgs);
  // The measured times: at least the emulated compute, at most the longest span the test
  // itself saw around that layer on any rank (a mean over iterations and ranks cannot
  // exceed it; the runtime times with its own clock, hence 0.1 ms; the fill and copies of the
  // gradient are part of the layer's compute too).
  MPI_Allreduce(MPI_IN_PLACE, longest.data(), static_cast<int>(L), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  for (std::size_t l = 0; l < L; ++l) {
    INFO("layer " << l << " measured " << rt.layers()[l].backward_s << ", longest span "
                  << longest[l]);
    CHECK(rt.layers()[l].backward_s >= 0.8 * emulated_s(l));
    CHECK(rt.layers()[l].backward_s <= longest[l] + 1e-4);  // 0.1 ms: two clocks
  }
  // Every rank has the same measured times (broadcast) and the same plan.
  double mine = 0;
  for (const auto& l : rt.layers()) mine += l.backward_s;
  double lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  long groups = static_cast<long>(rt.plan().groups.size()), glo = 0, ghi = 0;
  MPI_Allreduce(&groups, &glo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&groups, &ghi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  CHECK(glo == ghi);
  // Training goes on with the new plan, and no gradient mass was lost across the switch:
  // with density 1 the aggregated gradient is the plain average of all gradients.
  for (int it = 0; it < 2; ++it) {
    const omgs::IterationStats st = run_iteration(rt, rng, true);
    REQUIRE(st.status == omgs::Status::ok);
    CHECK_FALSE(st.profiling);
    CHECK_FALSE(st.replanned);
  }
}

TEST_CASE("measure with profile_iterations < 1 is an error on every rank", "[runtime][profile]") {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.perf_model = "reference";
  opt.backward_times = omgs::BackwardTimes::measure;
  opt.profile_iterations = world_rank() == world_size() - 1 ? 0 : 3;
  if (world_size() > 1 && world_size() != 2 && world_size() != 4) return;
  CHECK_THROWS_AS(omgs::Runtime(MPI_COMM_WORLD, untimed_layers(), opt), omgs::Error);
}

TEST_CASE("the measured timeline is consistent and follows the pipeline", "[runtime][timeline]") {
  auto layers = untimed_layers();
  for (std::size_t l = 0; l < layers.size(); ++l) layers[l].backward_s = emulated_s(l);
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 0.05;
  opt.planner = omgs::Planner::layerwise;
  opt.perf_model = "calibrate";
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  std::mt19937 rng(3);
  REQUIRE(run_iteration(rt, rng, true).status == omgs::Status::ok);
  const omgs::Timeline& t = rt.measured();
  REQUIRE(t.groups.size() == rt.plan().groups.size());
  double prev_topk_end = 0;
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const omgs::GroupTiming& x = t.groups[g];
    INFO("group " << g);
    CHECK(x.backward_start_s >= prev_topk_end - 1e-9);  // compute is one stream
    CHECK(x.topk_start_s >= x.backward_start_s);
    CHECK(x.topk_end_s >= x.topk_start_s);
    CHECK(x.comm_start_s >= x.topk_end_s - 1e-9);  // posted after the pairs were packed
    CHECK(x.comm_end_s >= x.comm_start_s);
    // This group's backward lasted at least its emulated compute.
    const omgs::Group& gr = rt.plan().groups[g];
    double expect = 0;
    for (std::size_t l = gr.begin; l < gr.end; ++l) expect += emulated_s(l);
    CHECK(x.topk_start_s - x.backward_start_s >= 0.8 * expect);
    prev_topk_end = x.topk_end_s;
  }
  CHECK(t.compute_end_s == prev_topk_end);
  const omgs::RuntimeStats rs = rt.stats();
  // The sparsify steps' CPU time: some, and at most their wall time (clock resolution aside).
  CHECK(rs.last.sparsify_cpu_s > 0);
  CHECK(rs.last.sparsify_cpu_s <= rs.last.sparsify_s + 1e-3);
  CHECK(rs.measured.iteration_end_s == t.iteration_end_s);
  CHECK(rs.last.iteration == 0);
  CHECK(rs.progress.groups_completed == rt.plan().groups.size());
  CHECK(t.iteration_end_s >= t.compute_end_s - 1e-9);
  CHECK(t.non_overlapped_comm_s >= 0);
  CHECK(t.comm_total_s > 0);
}

TEST_CASE("Chrome trace: one file per rank, valid JSON, every phase of every group",
          "[runtime][trace]") {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 0.05;
  opt.perf_model = "calibrate";
  opt.trace_path = "omgs_test_trace.%r.json";
  const std::string path = "omgs_test_trace." + std::to_string(world_rank()) + ".json";
  std::size_t groups = 0;
  {
    auto layers = untimed_layers();
    for (auto& l : layers) l.backward_s = 1e-4;
    omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
    groups = rt.plan().groups.size();
    std::mt19937 rng(1);
    for (int it = 0; it < 3; ++it)
      REQUIRE(run_iteration(rt, rng, it > 0).status == omgs::Status::ok);
    rt.write_trace();  // now; the destructor writes it again (complete)
    const std::string text = read_file(path);
    CHECK(count_of(text, "\"name\": \"allgather g") == 2 * 3 * groups);  // b + e events
  }
  const std::string text = read_file(path);
  const omgs::detail::JsonValue doc = omgs::detail::parse_json(text, path);
  const omgs::detail::JsonValue* events = doc.find("traceEvents");
  REQUIRE(events != nullptr);
  REQUIRE(events->is(omgs::detail::JsonValue::Kind::array));
  std::size_t backward = 0, sparsify = 0, aggregate = 0, wait = 0;
  for (const auto& e : events->array()) {
    const auto* name = e.find("name");
    const auto* ph = e.find("ph");
    REQUIRE(name != nullptr);
    REQUIRE(ph != nullptr);
    if (ph->string() == "X") {
      REQUIRE(e.find("dur") != nullptr);
      CHECK(e.find("dur")->number() >= 0);
      CHECK(e.find("ts")->number() >= 0);
      const std::string n = name->string();
      backward += n.rfind("backward g", 0) == 0;
      sparsify += n.rfind("sparsify g", 0) == 0;
      aggregate += n.rfind("aggregate g", 0) == 0;
      wait += n == "finish wait";
    }
  }
  CHECK(backward == 3 * groups);
  CHECK(sparsify == 3 * groups);
  CHECK(aggregate == 3 * groups);
  CHECK(wait == 3);
  std::remove(path.c_str());
}

TEST_CASE("SVG: predicted next to measured", "[runtime][svg]") {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 0.05;
  opt.perf_model = "calibrate";
  auto layers = untimed_layers();
  for (auto& l : layers) l.backward_s = 1e-4;
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  std::mt19937 rng(2);
  REQUIRE(run_iteration(rt, rng, true).status == omgs::Status::ok);
  const std::string path = "omgs_test_gantt." + std::to_string(world_rank()) + ".svg";
  rt.write_svg(path);
  const std::string svg = read_file(path);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("predicted") != std::string::npos);
  CHECK(svg.find("measured on rank " + std::to_string(world_rank())) != std::string::npos);
  // Three lanes per group in each of the two blocks.
  CHECK(count_of(svg, "<title>group ") == 2 * 3 * rt.plan().groups.size());
  std::remove(path.c_str());
  CHECK_THROWS_WITH(rt.write_svg("/nonexistent-dir/x.svg"), Catch::Contains("cannot write"));
}

TEST_CASE("bad OMGS_* environment values on one rank fail every rank with their name",
          "[runtime][env]") {
  auto layers = untimed_layers();
  for (auto& l : layers) l.backward_s = 1e-4;
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.perf_model = world_size() == 1 ? "calibrate" : "reference";  // reference: P >= 2
  if (world_size() != 1 && world_size() != 2 && world_size() != 4) return;
  const bool last = world_rank() == world_size() - 1;
  struct Case {
    const char* var;
    const char* value;
    const char* message;
  };
  const Case cases[] = {{"OMGS_TIMEOUT_S", "soon", "OMGS_TIMEOUT_S='soon'"},
                        {"OMGS_TIMEOUT_S", "-1", "OMGS_TIMEOUT_S='-1'"},
                        {"OMGS_ON_TIMEOUT", "retry", "OMGS_ON_TIMEOUT='retry'"},
                        {"OMGS_SHUTDOWN_TIMEOUT_S", "0", "OMGS_SHUTDOWN_TIMEOUT_S='0'"},
                        {"OMGS_PROGRESS_CPU", "first", "OMGS_PROGRESS_CPU"},
                        {"OMGS_GPU_AWARE_MPI", "maybe", "OMGS_GPU_AWARE_MPI"},
                        {"OMGS_TRACE", "/nonexistent-dir/t.json", "cannot write the trace file"},
                        {"OMGS_REFIT_ITERATIONS", "-2", "OMGS_REFIT_ITERATIONS='-2'"},
                        {"OMGS_MAX_REPLANS", "two", "OMGS_MAX_REPLANS='two'"},
                        {"OMGS_REPLAN_MIN_GAIN", "-0.1", "OMGS_REPLAN_MIN_GAIN='-0.1'"},
                        {"OMGS_SPARSE_EXCHANGE", "sparse", "OMGS_SPARSE_EXCHANGE='sparse'"},
                        {"OMGS_DENSE_ALLREDUCE", "sometimes", "OMGS_DENSE_ALLREDUCE='sometimes'"},
                        {"OMGS_COLLECTIVES", "sparse,,dense", "OMGS_COLLECTIVES='sparse,,dense'"}};
  for (const Case& c : cases) {
    INFO(c.var << "=" << c.value);
    EnvGuard env(c.var, c.value, last);
    if (last) {
      CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, opt), Catch::Contains(c.message));
    } else {
      CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers, opt),
                        Catch::Contains("rejected its input"));
    }
  }
  // Good values are applied.
  {
    EnvGuard a("OMGS_TIMEOUT_S", "12.5", true);
    EnvGuard b("OMGS_PROGRESS_CPU", "none", true);
    omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
    CHECK(rt.progress_stats().pinned_pu == -1);
  }
  // read_environment = false ignores them.
  {
    EnvGuard a("OMGS_TIMEOUT_S", "soon", true);
    opt.read_environment = false;
    CHECK_NOTHROW(omgs::Runtime(MPI_COMM_WORLD, layers, opt));
  }
}

TEST_CASE("read_runtime_environment parses every OMGS_* variable the runtime honours",
          "[runtime][env]") {
  using omgs::detail::read_runtime_environment;
  {
    const omgs::detail::RuntimeEnvironment none = read_runtime_environment();
    CHECK_FALSE(none.wait_timeout_s.has_value());
    CHECK_FALSE(none.abort_on_timeout.has_value());
    CHECK_FALSE(none.memory_budget_bytes.has_value());
    CHECK_FALSE(none.ranks_per_node.has_value());
  }
  EnvGuard pin("OMGS_PROGRESS_CPU", "3", true);
  EnvGuard gpu("OMGS_GPU_AWARE_MPI", "no", true);
  EnvGuard trace("OMGS_TRACE", "t.json", true);
  EnvGuard timeout("OMGS_TIMEOUT_S", "12.5", true);
  EnvGuard shutdown("OMGS_SHUTDOWN_TIMEOUT_S", "0.25", true);
  EnvGuard refit("OMGS_REFIT_ITERATIONS", "40", true);
  EnvGuard replans("OMGS_MAX_REPLANS", "0", true);
  EnvGuard gain("OMGS_REPLAN_MIN_GAIN", "0", true);
  EnvGuard action("OMGS_ON_TIMEOUT", "abort", true);
  EnvGuard exchange("OMGS_SPARSE_EXCHANGE", "automatic", true);
  EnvGuard dense("OMGS_DENSE_ALLREDUCE", "blocking", true);
  EnvGuard budget("OMGS_MEMORY_BUDGET", "2GiB", true);
  EnvGuard collectives("OMGS_COLLECTIVES", "sparse_allreduce,dense", true);
  EnvGuard rpn("OMGS_RANKS_PER_NODE", "4", true);
  const omgs::detail::RuntimeEnvironment env = read_runtime_environment();
  CHECK(*env.dense_allreduce == omgs::DenseAllreduce::blocking);
  CHECK(env.progress_pin->policy == omgs::PinPolicy::pu);
  CHECK(env.progress_pin->pu == 3);
  CHECK(*env.gpu_aware == omgs::GpuAwareMpi::no);
  CHECK(*env.trace_path == "t.json");
  CHECK(*env.wait_timeout_s == 12.5);
  CHECK(*env.shutdown_timeout_s == 0.25);
  CHECK(*env.refit_iterations == 40);
  CHECK(*env.max_replans == 0);
  CHECK(*env.replan_min_gain == 0.0);
  CHECK(*env.abort_on_timeout);
  CHECK(*env.sparse_exchange == omgs::SparseExchange::automatic);
  CHECK(*env.memory_budget_bytes == std::uint64_t{2} << 30);
  CHECK(*env.collectives ==
        omgs::CollectiveSet{omgs::Collective::sparse_allreduce, omgs::Collective::dense});
  CHECK(*env.ranks_per_node == 4);
  CHECK(*omgs::detail::read_ranks_per_node() == 4);
  // The first bad value in the order of the fields is named.
  EnvGuard bad_count("OMGS_MAX_REPLANS", "1000001", true);
  EnvGuard bad_action("OMGS_ON_TIMEOUT", "later", true);
  CHECK_THROWS_WITH(read_runtime_environment(),
                    "omgs: OMGS_MAX_REPLANS='1000001' is not a count in [0, 1000000]");
}
