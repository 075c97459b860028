// Internal: the one reader of omgs' environment variables (OMGS_*).
#pragma once

#include <string>

#include <omgs/comm.hpp>

namespace omgs::detail {

/// The value of environment variable `name` if it is set and not empty, else nullptr.
const char* env_value(const char* name) noexcept;

/// Applies OMGS_PROGRESS_CPU and OMGS_GPU_AWARE_MPI (they win over the options) and checks
/// them; throws omgs::Error naming the variable. `pin_source` becomes the name of what set
/// the pin (the variable, or stays as given).
void apply_progress_environment(PinOption& pin, GpuAwareMpi& gpu_aware, std::string& pin_source);

}  // namespace omgs::detail
