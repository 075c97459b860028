// The one reader of omgs' environment variables shared by the engine and the runtime.
#include "comm/environment.hpp"

#include <cstdlib>

namespace omgs::detail {

const char* env_value(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

void apply_progress_environment(PinOption& pin, GpuAwareMpi& gpu_aware, std::string& pin_source) {
  if (const char* v = env_value("OMGS_PROGRESS_CPU")) {
    pin = parse_pin_option(v, "OMGS_PROGRESS_CPU");
    pin_source = "OMGS_PROGRESS_CPU";
  }
  if (const char* v = env_value("OMGS_GPU_AWARE_MPI"))
    gpu_aware = parse_gpu_aware_option(v, "OMGS_GPU_AWARE_MPI");
}

}  // namespace omgs::detail
