// The C API (include/omgs/omgs.h): a thin layer over omgs::Runtime that turns every
// exception into a return code and a message.
#include <omgs/omgs.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <omgs/runtime.hpp>

#include "c_api/c_api_fields.hpp"
#include "comm/collectives.hpp"

struct omgs_runtime {
  std::unique_ptr<omgs::Runtime> rt;
  std::string error;
};

namespace {

using omgs::c_api::copy_from_c;
using omgs::c_api::copy_to_c;
using omgs::c_api::option_fields;
using omgs::c_api::refit_fields;
using omgs::c_api::stats_fields;

thread_local std::string g_error;  // omgs_create failures and argument errors
bool g_kokkos_ours = false;

int invalid(omgs_runtime* rt, const std::string& message) {
  (rt != nullptr ? rt->error : g_error) = message;
  return OMGS_ERROR_INVALID_ARGUMENT;
}

int from_status(omgs_runtime* rt, omgs::Status s) {
  if (s != omgs::Status::ok) rt->error = rt->rt->last_error();
  return static_cast<int>(s);
}

template <typename F>
int guarded(omgs_runtime* rt, F&& f) noexcept {
  try {
    return f();
  } catch (const omgs::Error& e) {
    (rt != nullptr ? rt->error : g_error) = e.what();
    return OMGS_ERROR_SETUP;
  } catch (const std::exception& e) {
    try {
      (rt != nullptr ? rt->error : g_error) = std::string("omgs: internal error: ") + e.what();
    } catch (...) {
    }
    return OMGS_ERROR_INTERNAL;
  } catch (...) {
    return OMGS_ERROR_INTERNAL;
  }
}

// which: 0 the gradient, 1 the aggregated gradient, 2 the residual; NULL (the error in rt)
// for an unknown layer or a gradient of another type than the one in force.
const float* layer_pointer(const omgs_runtime* rt, size_t layer, size_t* numel, int which) {
  if (numel != nullptr) *numel = 0;
  if (rt == nullptr || layer >= rt->rt->num_layers()) return nullptr;
  auto* m = const_cast<omgs_runtime*>(rt);
  const float* p = nullptr;
  guarded(m, [&] {
    omgs::ConstGradientView v = which == 0   ? omgs::ConstGradientView(m->rt->gradient(layer))
                                : which == 1 ? m->rt->aggregated(layer)
                                             : m->rt->residual(layer);
    if (numel != nullptr) *numel = v.extent(0);
    p = v.data();
    return OMGS_OK;
  });
  return p;
}

// The 16-bit slots (which: 0 the gradient, 1 the aggregated gradient) of the type in force.
const std::uint16_t* layer_pointer16(const omgs_runtime* rt, size_t layer, size_t* numel,
                                     int which) {
  if (numel != nullptr) *numel = 0;
  if (rt == nullptr || layer >= rt->rt->num_layers()) return nullptr;
  auto* m = const_cast<omgs_runtime*>(rt);
  const void* p = nullptr;
  guarded(m, [&] {
    const omgs::Runtime& r = *m->rt;
    const bool bf16 = r.gradient_type() == omgs::GradientType::bf16;
    p = which == 0 ? (bf16 ? static_cast<const void*>(r.gradient_bf16(layer).data())
                           : static_cast<const void*>(r.gradient_fp16(layer).data()))
                   : (bf16 ? static_cast<const void*>(r.aggregated_bf16(layer).data())
                           : static_cast<const void*>(r.aggregated_fp16(layer).data()));
    if (numel != nullptr) *numel = r.layers()[layer].numel;
    return OMGS_OK;
  });
  return static_cast<const std::uint16_t*>(p);
}

}  // namespace

// The C codes mirror omgs::Status one to one.
static_assert(OMGS_CONCURRENT_CALL == static_cast<int>(omgs::Status::concurrent_call) &&
                  OMGS_PLAN_FAILED == static_cast<int>(omgs::Status::plan_failed) &&
                  OMGS_NONFINITE_GRADIENT == static_cast<int>(omgs::Status::nonfinite_gradient),
              "omgs.h return codes out of step with omgs::Status");

extern "C" {

void omgs_options_init(omgs_options* o) {
  if (o == nullptr) return;
  // Never destroyed: the C strings of the defaults stay valid until the program ends.
  static const omgs::RuntimeOptions* const defaults = new omgs::RuntimeOptions();
  copy_to_c(option_fields, *defaults, *o);
}

int omgs_kokkos_initialize(int* argc, char*** argv) {
  return guarded(nullptr, [&] {
    if (Kokkos::is_initialized()) return OMGS_OK;
    if (argc != nullptr && argv != nullptr)
      Kokkos::initialize(*argc, *argv);
    else
      Kokkos::initialize();
    g_kokkos_ours = true;
    return OMGS_OK;
  });
}

void omgs_kokkos_finalize(void) {
  if (g_kokkos_ours && Kokkos::is_initialized()) Kokkos::finalize();
  g_kokkos_ours = false;
}

int omgs_create(MPI_Comm comm, const omgs_layer* layers, size_t num_layers,
                const omgs_options* options, omgs_runtime** out) {
  if (out == nullptr) return invalid(nullptr, "omgs_create: out is NULL");
  *out = nullptr;
  g_error.clear();
  return guarded(nullptr, [&] {
    // Translate the C arguments; an error here is agreed on with the other ranks (on a
    // duplicate of comm) before the runtime's collectives, so no rank is left waiting.
    std::string local_error;
    std::vector<omgs::LayerSpec> specs;
    omgs::RuntimeOptions opt;
    try {
      if (layers == nullptr && num_layers > 0)
        throw omgs::Error("omgs_create: layers is NULL but num_layers = " +
                          std::to_string(num_layers));
      specs.reserve(num_layers);
      for (size_t i = 0; i < num_layers; ++i) {
        if (layers[i].name == nullptr)
          throw omgs::Error("omgs_create: layer " + std::to_string(i) + " has a NULL name");
        specs.push_back({layers[i].name, layers[i].numel, layers[i].backward_s});
      }
      if (options != nullptr) copy_from_c(option_fields, *options, opt);
    } catch (const omgs::Error& e) {
      local_error = e.what();
    }
    if (comm == MPI_COMM_NULL) throw omgs::Error("omgs_create: comm is MPI_COMM_NULL");
    {
      const omgs::detail::OwnedComm check(comm);
      omgs::detail::agree_on_error(check.get(), local_error, "omgs_create");
    }
    auto h = std::make_unique<omgs_runtime>();
    h->rt = std::make_unique<omgs::Runtime>(comm, std::move(specs), std::move(opt));
    *out = h.release();
    return OMGS_OK;
  });
}

void omgs_destroy(omgs_runtime* rt) {
  delete rt;  // ~Runtime does not throw
}

size_t omgs_num_layers(const omgs_runtime* rt) {
  return rt != nullptr ? rt->rt->num_layers() : 0;
}

size_t omgs_num_groups(const omgs_runtime* rt) {
  return rt != nullptr ? rt->rt->plan().groups.size() : 0;
}

size_t omgs_group_of_layer(const omgs_runtime* rt, size_t layer) {
  if (rt == nullptr || layer >= rt->rt->num_layers()) return static_cast<size_t>(-1);
  return rt->rt->plan().group_of_layer[layer];
}

float* omgs_gradient(omgs_runtime* rt, size_t layer, size_t* numel) {
  return const_cast<float*>(layer_pointer(rt, layer, numel, 0));
}

uint16_t* omgs_gradient16(omgs_runtime* rt, size_t layer, size_t* numel) {
  return const_cast<uint16_t*>(layer_pointer16(rt, layer, numel, 0));
}

const uint16_t* omgs_aggregated16(const omgs_runtime* rt, size_t layer, size_t* numel) {
  return layer_pointer16(rt, layer, numel, 1);
}

const float* omgs_aggregated(const omgs_runtime* rt, size_t layer, size_t* numel) {
  return layer_pointer(rt, layer, numel, 1);
}

const float* omgs_residual(const omgs_runtime* rt, size_t layer, size_t* numel) {
  return layer_pointer(rt, layer, numel, 2);
}

const float* omgs_momentum(const omgs_runtime* rt, size_t layer, size_t* numel) {
  if (numel != nullptr) *numel = 0;
  if (rt == nullptr) return nullptr;
  auto* m = const_cast<omgs_runtime*>(rt);
  const float* p = nullptr;
  guarded(m, [&] {
    const omgs::ConstGradientView v = m->rt->momentum(layer);
    if (numel != nullptr) *numel = v.extent(0);
    p = v.data();
    return OMGS_OK;
  });
  return p;
}

int omgs_set_density(omgs_runtime* rt, double density) {
  if (rt == nullptr) return invalid(nullptr, "omgs_set_density: rt is NULL");
  return guarded(rt, [&] {
    rt->rt->set_density(density);
    return OMGS_OK;
  });
}

double omgs_density(const omgs_runtime* rt) {
  return rt != nullptr ? rt->rt->density() : 0.0;
}

int omgs_begin_backward(omgs_runtime* rt) {
  if (rt == nullptr) return invalid(nullptr, "omgs_begin_backward: rt is NULL");
  rt->rt->begin_backward();
  return OMGS_OK;
}

int omgs_ready(omgs_runtime* rt, size_t layer) {
  if (rt == nullptr) return invalid(nullptr, "omgs_ready: rt is NULL");
  return from_status(rt, rt->rt->ready(layer));
}

int omgs_finish(omgs_runtime* rt, omgs_iteration_stats* stats) {
  if (rt == nullptr) return invalid(nullptr, "omgs_finish: rt is NULL");
  const omgs::IterationStats st = rt->rt->finish();
  if (stats != nullptr) copy_to_c(stats_fields, st, *stats);
  return from_status(rt, st.status);
}

int omgs_buffers_on_host(void) {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, omgs::DeviceMemory>::accessible ? 1 : 0;
}

int omgs_last_refit(const omgs_runtime* rt, omgs_refit_report* report) {
  if (rt == nullptr) return invalid(nullptr, "omgs_last_refit: rt is NULL");
  if (report == nullptr)
    return invalid(const_cast<omgs_runtime*>(rt), "omgs_last_refit: report is NULL");
  const omgs::RefitReport& r = rt->rt->last_refit();
  copy_to_c(refit_fields, r, *report);
  report->model = r.model.c_str();
  // A literal, null-terminated; "" before the first refit, like the model.
  report->candidate_planner = r.model.empty() ? "" : omgs::to_string(r.candidate_planner).data();
  report->num_groups = r.group_numel.size();
  report->group_numel = r.group_numel.data();
  report->group_sparsify_s = r.group_sparsify_s.data();
  report->group_allgather_s = r.group_allgather_s.data();
  return OMGS_OK;
}

int omgs_save_perf_model(const omgs_runtime* rt, const char* path) {
  if (rt == nullptr) return invalid(nullptr, "omgs_save_perf_model: rt is NULL");
  auto* m = const_cast<omgs_runtime*>(rt);
  if (path == nullptr || path[0] == '\0')
    return invalid(
        m, std::string("omgs_save_perf_model: path is ") + (path == nullptr ? "NULL" : "empty"));
  return guarded(m, [&] {
    m->rt->save_perf_model(path);
    return OMGS_OK;
  });
}

int omgs_model_line(const omgs_runtime* rt, const char* collective, double* alpha_s,
                    double* beta_s_per_byte) {
  if (rt == nullptr) return invalid(nullptr, "omgs_model_line: rt is NULL");
  auto* m = const_cast<omgs_runtime*>(rt);
  if (collective == nullptr || alpha_s == nullptr || beta_s_per_byte == nullptr)
    return invalid(m, "omgs_model_line: collective, alpha_s and beta_s_per_byte must not be NULL");
  return guarded(m, [&] {
    const omgs::PerfModel& model = m->rt->perf_model();
    const omgs::AlphaBetaModel* ab = model.as_alpha_beta();
    const int p = m->rt->size();
    if (ab == nullptr)
      throw omgs::Error("omgs_model_line: the model in force is not an alpha-beta model (" +
                        model.describe() + "): it has no lines");
    const omgs::CollectiveCosts* line = ab->line(collective);
    if (line == nullptr)
      throw omgs::Error(std::string("omgs_model_line: the model in force has no line for \"") +
                        collective + "\"");
    const auto it = line->table.find(p);
    if (it == line->table.end())
      throw omgs::Error(std::string("omgs_model_line: the model's \"") + collective +
                        "\" line has no entry for P = " + std::to_string(p) +
                        " (a formula of P: see omgs_model_collective_s)");
    *alpha_s = it->second.alpha_s;
    *beta_s_per_byte = it->second.beta_s_per_byte;
    return OMGS_OK;
  });
}

int omgs_model_collective_s(const omgs_runtime* rt, const char* collective, uint64_t numel,
                            double* seconds) {
  if (rt == nullptr) return invalid(nullptr, "omgs_model_collective_s: rt is NULL");
  auto* m = const_cast<omgs_runtime*>(rt);
  if (collective == nullptr || seconds == nullptr)
    return invalid(m, "omgs_model_collective_s: collective and seconds must not be NULL");
  return guarded(m, [&] {
    *seconds = m->rt->perf_model().collective_s(collective, numel, m->rt->size(), m->rt->density());
    return OMGS_OK;
  });
}

int omgs_write_trace(const omgs_runtime* rt, const char* path) {
  if (rt == nullptr) return invalid(nullptr, "omgs_write_trace: rt is NULL");
  auto* m = const_cast<omgs_runtime*>(rt);
  return guarded(m, [&] {
    m->rt->write_trace(path != nullptr ? path : "");
    return OMGS_OK;
  });
}

int omgs_write_svg(const omgs_runtime* rt, const char* path) {
  if (rt == nullptr) return invalid(nullptr, "omgs_write_svg: rt is NULL");
  if (path == nullptr)
    return invalid(const_cast<omgs_runtime*>(rt), "omgs_write_svg: path is NULL");
  auto* m = const_cast<omgs_runtime*>(rt);
  return guarded(m, [&] {
    m->rt->write_svg(path);
    return OMGS_OK;
  });
}

const char* omgs_last_error(const omgs_runtime* rt) {
  return rt != nullptr ? rt->error.c_str() : g_error.c_str();
}

const char* omgs_status_string(int code) {
  switch (code) {
    case OMGS_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case OMGS_ERROR_SETUP:
      return "set-up failed";
    case OMGS_ERROR_INTERNAL:
      return "internal error";
    default:
      break;
  }
  if (code >= 0 && code <= OMGS_PLAN_FAILED)
    return omgs::to_string(static_cast<omgs::Status>(code));
  return "unknown code";
}

}  // extern "C"
