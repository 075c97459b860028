// Internal: the one reader of omgs' environment variables (OMGS_*). Every variable is read
// and checked here; the engine and the runtime apply what they need of it.
#pragma once

#include <optional>
#include <string>

#include <omgs/allreduce_form.hpp>
#include <omgs/comm.hpp>
#include <omgs/export.hpp>
#include <omgs/plan.hpp>

namespace omgs::detail {

/// The value of environment variable `name` if it is set and not empty, else nullptr.
const char* env_value(const char* name) noexcept;

/// Applies OMGS_PROGRESS_CPU and OMGS_GPU_AWARE_MPI (they win over the options) and checks
/// them; throws omgs::Error naming the variable. `pin_source` becomes the name of what set
/// the pin (the variable, or stays as given).
void apply_progress_environment(PinOption& pin, GpuAwareMpi& gpu_aware, std::string& pin_source);

/// Every OMGS_* variable the runtime honours, checked; a variable unset or empty is absent.
struct RuntimeEnvironment {
  std::optional<PinOption> progress_pin;          ///< OMGS_PROGRESS_CPU
  std::optional<GpuAwareMpi> gpu_aware;           ///< OMGS_GPU_AWARE_MPI
  std::optional<std::string> trace_path;          ///< OMGS_TRACE
  std::optional<double> wait_timeout_s;           ///< OMGS_TIMEOUT_S: > 0
  std::optional<double> shutdown_timeout_s;       ///< OMGS_SHUTDOWN_TIMEOUT_S: > 0
  std::optional<int> refit_iterations;            ///< OMGS_REFIT_ITERATIONS: in [0, 1000000]
  std::optional<int> max_replans;                 ///< OMGS_MAX_REPLANS: in [0, 1000000]
  std::optional<double> replan_min_gain;          ///< OMGS_REPLAN_MIN_GAIN: finite, >= 0
  std::optional<bool> abort_on_timeout;           ///< OMGS_ON_TIMEOUT: "abort" (true) or "report"
  std::optional<SparseExchange> sparse_exchange;  ///< OMGS_SPARSE_EXCHANGE
  std::optional<std::string> pair_wire;           ///< OMGS_PAIR_WIRE: pairs8, fp32, bf16, fp16
  std::optional<DenseAllreduce> dense_allreduce;  ///< OMGS_DENSE_ALLREDUCE
  std::optional<std::uint64_t> memory_budget_bytes;  ///< OMGS_MEMORY_BUDGET: a byte count
  std::optional<CollectiveSet> collectives;          ///< OMGS_COLLECTIVES: names, comma-separated
  std::optional<int> ranks_per_node;    ///< OMGS_RANKS_PER_NODE: in [0, 1000000] (0: shared memory)
  std::optional<DenseWire> dense_wire;  ///< OMGS_DENSE_WIRE: automatic, fp32, bf16, fp16
};

/// OMGS_RANKS_PER_NODE (ProgressOptions::ranks_per_node): a count in [0, 1000000]; throws
/// omgs::Error naming the variable otherwise.
OMGS_EXPORT std::optional<int> read_ranks_per_node();

/// Reads the variables in the order of RuntimeEnvironment's fields; throws omgs::Error
/// naming the first one whose value is not valid.
OMGS_EXPORT RuntimeEnvironment read_runtime_environment();

/// `option` = `value` if the variable was set: the environment wins over the options.
template <typename T>
void apply_if_set(T& option, const std::optional<T>& value) {
  if (value) option = *value;
}

}  // namespace omgs::detail
