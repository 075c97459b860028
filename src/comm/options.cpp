// Option parsing and GPU-aware MPI detection of the comm module.
#include <omgs/comm.hpp>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

// Open MPI declares its GPU queries in <mpi-ext.h> (extensions "cuda", "rocm").
#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

namespace omgs {

namespace {
std::string lower(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}
}  // namespace

PinOption parse_pin_option(std::string_view text, std::string_view what) {
  const std::string v = lower(text);
  PinOption out;
  if (v == "auto") {
    out.policy = PinPolicy::automatic;
    return out;
  }
  if (v == "none") {
    out.policy = PinPolicy::none;
    return out;
  }
  bool digits = !v.empty() && v.size() < 10;
  for (char c : v) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    out.policy = PinPolicy::pu;
    out.pu = std::atoi(v.c_str());
    return out;
  }
  throw Error(std::string(what) + " = '" + std::string(text) +
              "': expected auto, none or a PU index (a non-negative integer)");
}

GpuAwareMpi parse_gpu_aware_option(std::string_view text, std::string_view what) {
  const std::string v = lower(text);
  if (v == "auto") return GpuAwareMpi::automatic;
  if (v == "1" || v == "yes" || v == "on" || v == "true") return GpuAwareMpi::yes;
  if (v == "0" || v == "no" || v == "off" || v == "false") return GpuAwareMpi::no;
  throw Error(std::string(what) + " = '" + std::string(text) + "': expected auto, 1 or 0");
}

bool mpi_reports_gpu_support() {
  bool supported = false;
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  // Run-time answer: the library may be built with CUDA support and still have it off.
  supported = supported || MPIX_Query_cuda_support() != 0;
#endif
#if defined(OMPI_HAVE_MPI_EXT_ROCM) && OMPI_HAVE_MPI_EXT_ROCM
  supported = supported || MPIX_Query_rocm_support() != 0;
#endif
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
  // MPICH >= 4.0: MPIX_GPU_query_support(type, &is_supported).
  int is_supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &is_supported) == MPI_SUCCESS) {
    supported = supported || is_supported != 0;
  }
  is_supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &is_supported) == MPI_SUCCESS) {
    supported = supported || is_supported != 0;
  }
#endif
  return supported;
}

const char* to_string(ProgressMode mode) {
  return mode == ProgressMode::thread ? "thread" : "inline";
}

std::string_view to_string(DenseWire wire) {
  switch (wire) {
    case DenseWire::automatic:
      return "automatic";
    case DenseWire::fp32:
      return "fp32";
    case DenseWire::bf16:
      return "bf16";
    case DenseWire::fp16:
      return "fp16";
  }
  return "unknown";
}

DenseWire parse_dense_wire(std::string_view name, std::string_view what) {
  for (DenseWire w : {DenseWire::automatic, DenseWire::fp32, DenseWire::bf16, DenseWire::fp16})
    if (name == to_string(w)) return w;
  throw Error("omgs: " + std::string(what) + " '" + std::string(name) +
              "' is not automatic, fp32, bf16 or fp16");
}

const char* to_string(SubmitStatus status) {
  switch (status) {
    case SubmitStatus::ok:
      return "ok";
    case SubmitStatus::queue_full:
      return "queue_full";
    case SubmitStatus::busy:
      return "busy";
    case SubmitStatus::bad_group:
      return "bad_group";
    case SubmitStatus::stopped:
      return "stopped";
  }
  return "?";
}

const char* to_string(WaitStatus status) {
  switch (status) {
    case WaitStatus::ok:
      return "ok";
    case WaitStatus::timeout:
      return "timeout";
    case WaitStatus::not_submitted:
      return "not_submitted";
    case WaitStatus::failed:
      return "failed";
  }
  return "?";
}

}  // namespace omgs
