// The one reader of omgs' environment variables, shared by the engine and the runtime.
#include "comm/environment.hpp"

#include <cmath>
#include <cstdlib>

namespace omgs::detail {

namespace {

std::optional<PinOption> read_pin() {
  const char* v = env_value("OMGS_PROGRESS_CPU");
  if (v == nullptr) return std::nullopt;
  return parse_pin_option(v, "OMGS_PROGRESS_CPU");
}

std::optional<GpuAwareMpi> read_gpu_aware() {
  const char* v = env_value("OMGS_GPU_AWARE_MPI");
  if (v == nullptr) return std::nullopt;
  return parse_gpu_aware_option(v, "OMGS_GPU_AWARE_MPI");
}

/// The variable's number, if set: `parse` (strtod, strtol) must take the whole value and
/// `valid` accept it, else it throws naming the variable and what was `expected`.
template <typename T, typename Parse, typename Valid>
std::optional<T> read_number(const char* name, Parse parse, Valid valid, const char* expected) {
  const char* v = env_value(name);
  if (v == nullptr) return std::nullopt;
  char* end = nullptr;
  const auto x = parse(v, &end);
  if (end == v || *end != '\0' || !valid(x))
    throw Error(std::string("omgs: ") + name + "='" + v + "' is not " + expected);
  return static_cast<T>(x);
}

double parse_double(const char* v, char** end) {
  return std::strtod(v, end);
}
long parse_long(const char* v, char** end) {
  return std::strtol(v, end, 10);
}

std::optional<double> read_seconds(const char* name) {
  return read_number<double>(
      name, parse_double, [](double t) { return std::isfinite(t) && t > 0; },
      "a positive number of seconds");
}

std::optional<int> read_count(const char* name) {
  return read_number<int>(
      name, parse_long, [](long n) { return n >= 0 && n <= 1000000; }, "a count in [0, 1000000]");
}

std::optional<double> read_replan_min_gain() {
  return read_number<double>(
      "OMGS_REPLAN_MIN_GAIN", parse_double, [](double x) { return std::isfinite(x) && x >= 0; },
      "a number >= 0 (a fraction of the predicted iteration)");
}

std::optional<bool> read_abort_on_timeout() {
  const char* v = env_value("OMGS_ON_TIMEOUT");
  if (v == nullptr) return std::nullopt;
  const std::string a = v;
  if (a != "report" && a != "abort")
    throw Error("omgs: OMGS_ON_TIMEOUT='" + a + "' is not 'report' or 'abort'");
  return a == "abort";
}

std::optional<SparseExchange> read_sparse_exchange() {
  const char* v = env_value("OMGS_SPARSE_EXCHANGE");
  if (v == nullptr) return std::nullopt;
  try {
    return parse_sparse_exchange(v);
  } catch (const Error&) {
    throw Error(std::string("omgs: OMGS_SPARSE_EXCHANGE='") + v +
                "' is not 'allgather', 'allreduce' or 'automatic'");
  }
}

/// OMGS_PAIR_WIRE: one of the names of omgs::PairWire (the runtime parses it).
std::optional<std::string> read_pair_wire() {
  const char* v = env_value("OMGS_PAIR_WIRE");
  if (v == nullptr) return std::nullopt;
  const std::string a = v;
  if (a != "pairs8" && a != "fp32" && a != "bf16" && a != "fp16")
    throw Error("omgs: OMGS_PAIR_WIRE='" + a + "' is not pairs8, fp32, bf16 or fp16");
  return a;
}

std::optional<DenseAllreduce> read_dense_allreduce() {
  const char* v = env_value("OMGS_DENSE_ALLREDUCE");
  if (v == nullptr) return std::nullopt;
  try {
    return parse_dense_allreduce(v);
  } catch (const Error&) {
    throw Error(std::string("omgs: OMGS_DENSE_ALLREDUCE='") + v +
                "' is not 'automatic', 'nonblocking' or 'blocking'");
  }
}

/// OMGS_MEMORY_BUDGET: a byte count (parse_byte_size: 4096, 512MiB, 2GiB, 1.5GB; 0: none).
std::optional<std::uint64_t> read_memory_budget() {
  const char* v = env_value("OMGS_MEMORY_BUDGET");
  if (v == nullptr) return std::nullopt;
  try {
    return parse_byte_size(v);
  } catch (const Error&) {
    throw Error(std::string("omgs: OMGS_MEMORY_BUDGET='") + v +
                "' is not a byte count (e.g. 4096, 512MiB, 2GiB, 1.5GB; 0: no limit)");
  }
}

/// OMGS_COLLECTIVES: the names of the table's rows, comma-separated (parse_collective_set).
std::optional<CollectiveSet> read_collectives() {
  const char* v = env_value("OMGS_COLLECTIVES");
  if (v == nullptr) return std::nullopt;
  try {
    return parse_collective_set(v);
  } catch (const Error& e) {
    throw Error(std::string("omgs: OMGS_COLLECTIVES='") + v + "': " + e.what());
  }
}

}  // namespace

std::optional<int> read_ranks_per_node() {
  return read_count("OMGS_RANKS_PER_NODE");
}

const char* env_value(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

void apply_progress_environment(PinOption& pin, GpuAwareMpi& gpu_aware, std::string& pin_source) {
  if (const std::optional<PinOption> p = read_pin()) {
    pin = *p;
    pin_source = "OMGS_PROGRESS_CPU";
  }
  apply_if_set(gpu_aware, read_gpu_aware());
}

RuntimeEnvironment read_runtime_environment() {
  RuntimeEnvironment env;
  env.progress_pin = read_pin();
  env.gpu_aware = read_gpu_aware();
  if (const char* v = env_value("OMGS_TRACE")) env.trace_path = v;
  env.wait_timeout_s = read_seconds("OMGS_TIMEOUT_S");
  env.shutdown_timeout_s = read_seconds("OMGS_SHUTDOWN_TIMEOUT_S");
  env.refit_iterations = read_count("OMGS_REFIT_ITERATIONS");
  env.max_replans = read_count("OMGS_MAX_REPLANS");
  env.replan_min_gain = read_replan_min_gain();
  env.abort_on_timeout = read_abort_on_timeout();
  env.sparse_exchange = read_sparse_exchange();
  env.pair_wire = read_pair_wire();
  env.dense_allreduce = read_dense_allreduce();
  env.memory_budget_bytes = read_memory_budget();
  env.collectives = read_collectives();
  env.ranks_per_node = read_ranks_per_node();
  if (const char* v = env_value("OMGS_DENSE_WIRE"))
    env.dense_wire = parse_dense_wire(v, "OMGS_DENSE_WIRE");
  return env;
}

}  // namespace omgs::detail
