// The C API (include/omgs/omgs.h): a thin layer over omgs::Runtime that turns every
// exception into a return code and a message.
#include <omgs/omgs.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <omgs/runtime.hpp>

#include "comm/collectives.hpp"

struct omgs_runtime {
  std::unique_ptr<omgs::Runtime> rt;
  std::string error;
};

namespace {

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

const float* layer_pointer(const omgs_runtime* rt, size_t layer, size_t* numel, int which) {
  if (rt == nullptr || layer >= rt->rt->num_layers()) {
    if (numel != nullptr) *numel = 0;
    return nullptr;
  }
  omgs::ConstGradientView v = which == 0   ? omgs::ConstGradientView(rt->rt->gradient(layer))
                              : which == 1 ? rt->rt->aggregated(layer)
                                           : rt->rt->residual(layer);
  if (numel != nullptr) *numel = v.extent(0);
  return v.data();
}

// Each C struct mirrors a C++ one: one row per field names the C member and the C++
// member it stands for, and to_c / from_c convert between them, so a new field is one row.
template <typename C, typename CField, typename Cpp, typename CppField>
struct FieldMap {
  CField C::*c;
  CppField Cpp::*cpp;
};
template <typename C, typename CField, typename Cpp, typename CppField>
constexpr FieldMap<C, CField, Cpp, CppField> field(CField C::*c, CppField Cpp::*cpp) {
  return {c, cpp};
}

// C++ to C: numbers as they are, bool as 0 / 1, enums as the C code.
template <typename CField, typename CppField>
void to_c(CField& c, const CppField& v) {
  c = v;
}
void to_c(int& c, omgs::Status s) {
  c = static_cast<int>(s);
}
void to_c(int& c, omgs::TimeoutAction a) {
  c = a == omgs::TimeoutAction::abort ? 1 : 0;
}
// Enums named by a string (Planner, SparseExchange, DenseAllreduce): their to_string.
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
void to_c(const char*& c, E e) {
  c = omgs::to_string(e).data();  // a string literal: NUL-terminated, never freed
}
// The C string points into `v`, which must outlive it; an empty string is NULL.
void to_c(const char*& c, const std::string& v) {
  c = v.empty() ? nullptr : v.c_str();
}

// C to C++: a NULL string keeps the C++ value (the default).
template <typename CppField, typename CField>
void from_c(CppField& v, const CField& c) {
  v = c;
}
void from_c(bool& v, int c) {
  v = c != 0;
}
void from_c(omgs::TimeoutAction& a, int c) {
  a = c != 0 ? omgs::TimeoutAction::abort : omgs::TimeoutAction::report;
}
void from_c(omgs::Planner& p, const char* c) {
  if (c != nullptr) p = omgs::parse_planner(c);
}
void from_c(omgs::SparseExchange& e, const char* c) {
  if (c != nullptr) e = omgs::parse_sparse_exchange(c);
}
void from_c(omgs::DenseAllreduce& d, const char* c) {
  if (c != nullptr) d = omgs::parse_dense_allreduce(c);
}
void from_c(std::string& v, const char* c) {
  if (c != nullptr) v = c;
}

template <typename Table, typename Cpp, typename C>
void copy_to_c(const Table& table, const Cpp& from, C& to) {
  std::apply([&](const auto&... row) { (to_c(to.*row.c, from.*row.cpp), ...); }, table);
}
template <typename Table, typename C, typename Cpp>
void copy_from_c(const Table& table, const C& from, Cpp& to) {
  std::apply([&](const auto&... row) { (from_c(to.*row.cpp, from.*row.c), ...); }, table);
}

using omgs::IterationStats;
using omgs::RefitReport;
using omgs::RuntimeOptions;

constexpr auto option_fields = std::make_tuple(
    field(&omgs_options::density, &RuntimeOptions::density),
    field(&omgs_options::planner, &RuntimeOptions::planner),
    field(&omgs_options::perf_model, &RuntimeOptions::perf_model),
    field(&omgs_options::threshold_numel, &RuntimeOptions::threshold_numel),
    field(&omgs_options::force_inline_progress, &RuntimeOptions::force_inline_progress),
    field(&omgs_options::wait_timeout_s, &RuntimeOptions::wait_timeout_s),
    field(&omgs_options::abort_on_timeout, &RuntimeOptions::on_timeout),
    field(&omgs_options::profile_iterations, &RuntimeOptions::profile_iterations),
    field(&omgs_options::trace_path, &RuntimeOptions::trace_path),
    field(&omgs_options::shutdown_timeout_s, &RuntimeOptions::shutdown_timeout_s),
    field(&omgs_options::refit_iterations, &RuntimeOptions::refit_iterations),
    field(&omgs_options::max_replans, &RuntimeOptions::max_replans),
    field(&omgs_options::replan_min_gain, &RuntimeOptions::replan_min_gain),
    field(&omgs_options::sparse_exchange, &RuntimeOptions::sparse_exchange),
    field(&omgs_options::warmup_density, &RuntimeOptions::warmup_density),
    field(&omgs_options::warmup_iterations, &RuntimeOptions::warmup_iterations),
    field(&omgs_options::warmup_stages, &RuntimeOptions::warmup_stages),
    field(&omgs_options::momentum, &RuntimeOptions::momentum),
    field(&omgs_options::clip_norm, &RuntimeOptions::clip_norm),
    field(&omgs_options::dense_allreduce, &RuntimeOptions::dense_allreduce));

constexpr auto stats_fields = std::make_tuple(
    field(&omgs_iteration_stats::status, &IterationStats::status),
    field(&omgs_iteration_stats::failed_group, &IterationStats::failed_group),
    field(&omgs_iteration_stats::nonfinite, &IterationStats::nonfinite),
    field(&omgs_iteration_stats::sparsify_s, &IterationStats::sparsify_s),
    field(&omgs_iteration_stats::sparsify_cpu_s, &IterationStats::sparsify_cpu_s),
    field(&omgs_iteration_stats::finish_wait_s, &IterationStats::finish_wait_s),
    field(&omgs_iteration_stats::aggregate_s, &IterationStats::aggregate_s),
    field(&omgs_iteration_stats::iteration_s, &IterationStats::iteration_s),
    field(&omgs_iteration_stats::bytes_sent, &IterationStats::bytes_sent),
    field(&omgs_iteration_stats::bytes_received, &IterationStats::bytes_received),
    field(&omgs_iteration_stats::iteration, &IterationStats::iteration),
    field(&omgs_iteration_stats::profiling, &IterationStats::profiling),
    field(&omgs_iteration_stats::replanned, &IterationStats::replanned),
    field(&omgs_iteration_stats::predicted_s, &IterationStats::predicted_s),
    field(&omgs_iteration_stats::measured_s, &IterationStats::measured_s),
    field(&omgs_iteration_stats::model_generation, &IterationStats::model_generation),
    field(&omgs_iteration_stats::plan_generation, &IterationStats::plan_generation),
    field(&omgs_iteration_stats::refitted, &IterationStats::refitted));

// The refit report's copied fields; its model and per-group arrays point into the runtime.
constexpr auto refit_fields = std::make_tuple(
    field(&omgs_refit_report::iteration, &RefitReport::iteration),
    field(&omgs_refit_report::iterations_fitted, &RefitReport::iterations_fitted),
    field(&omgs_refit_report::measured_s, &RefitReport::measured_s),
    field(&omgs_refit_report::owner_wait_s, &RefitReport::owner_wait_s),
    field(&omgs_refit_report::predicted_current_s, &RefitReport::predicted_current_s),
    field(&omgs_refit_report::predicted_candidate_s, &RefitReport::predicted_candidate_s),
    field(&omgs_refit_report::candidate_groups, &RefitReport::candidate_groups),
    field(&omgs_refit_report::switched, &RefitReport::switched),
    field(&omgs_refit_report::explored, &RefitReport::explored),
    field(&omgs_refit_report::taken_back, &RefitReport::taken_back),
    field(&omgs_refit_report::measured_iteration_s, &RefitReport::measured_iteration_s),
    field(&omgs_refit_report::settled, &RefitReport::settled));

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
  static const RuntimeOptions* const defaults = new RuntimeOptions();
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
