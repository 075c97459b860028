// Internal to the C API (c_api.cpp): each C struct of include/omgs/omgs.h mapped to the C++
// struct it mirrors, field by field, and the conversions between their member types.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>

#include <omgs/omgs.h>
#include <omgs/runtime.hpp>

namespace omgs::c_api {

// Each C struct mirrors a C++ one: one row per field names the C member and the C++
// member it stands for, and to_c / from_c convert between them, so a new field is one row.
template <typename C, typename CField, typename Cpp, typename CppField>
struct FieldMap {
  // Through aliases: nvcc's rewrite of a declarator `T C::*c` adds parentheses that the
  // host g++ warns about (-Wparentheses).
  using CMember = CField C::*;
  using CppMember = CppField Cpp::*;
  CMember c;
  CppMember cpp;
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
// Enums named by a string (Planner, SparseExchange, PairWire, DenseAllreduce, GradientType,
// DenseWire): their
// to_string.
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
void to_c(const char*& c, E e) {
  c = omgs::to_string(e).data();  // a string literal: NUL-terminated, never freed
}
// Only the default, empty, set is ever converted (omgs_options_init): NULL.
void to_c(const char*& c, const omgs::CollectiveSet& s) {
  if (!s.empty()) throw omgs::Error("omgs: internal: a non-empty collective set to C");
  c = nullptr;
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
void from_c(omgs::PairWire& w, const char* c) {
  if (c != nullptr) w = omgs::parse_pair_wire(c);
}
void from_c(omgs::GradientType& t, const char* c) {
  if (c != nullptr) t = omgs::parse_gradient_type(c);
}
void from_c(omgs::DenseWire& w, const char* c) {
  if (c != nullptr) w = omgs::parse_dense_wire(c);
}
void from_c(omgs::DenseAllreduce& d, const char* c) {
  if (c != nullptr) d = omgs::parse_dense_allreduce(c);
}
void from_c(omgs::CollectiveSet& s, const char* c) {
  if (c != nullptr) s = omgs::parse_collective_set(c);
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
    field(&omgs_options::pair_wire, &RuntimeOptions::pair_wire),
    field(&omgs_options::dense_allreduce, &RuntimeOptions::dense_allreduce),
    field(&omgs_options::gradient_type, &RuntimeOptions::gradient_type),
    field(&omgs_options::collectives, &RuntimeOptions::collectives),
    field(&omgs_options::memory_budget_bytes, &RuntimeOptions::memory_budget_bytes),
    field(&omgs_options::dense_wire, &RuntimeOptions::dense_wire),
    field(&omgs_options::ranks_per_node, &RuntimeOptions::ranks_per_node));

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
    field(&omgs_iteration_stats::refitted, &IterationStats::refitted),
    field(&omgs_iteration_stats::pairs_sent, &IterationStats::pairs_sent),
    field(&omgs_iteration_stats::bytes_per_pair, &IterationStats::bytes_per_pair));

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

}  // namespace omgs::c_api
