// The runtime's outputs for people: the Chrome trace of measured events and the SVG of the
// predicted and measured timelines.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

namespace {

const char* trace_name(TraceKind k) {
  switch (k) {
    case TraceKind::backward:
      return "backward";
    case TraceKind::sparsify:
      return "sparsify";
    case TraceKind::queue:
      return "queue wait";
    case TraceKind::exchange:
      return "exchange";
    case TraceKind::aggregate:
      return "aggregate";
    case TraceKind::wait:
      return "finish wait";
    case TraceKind::refit:
      return "refit (plan kept)";
    case TraceKind::replan:
      return "refit and replan";
    case TraceKind::refit_fit:
      return "fit: collectives and model";
    case TraceKind::install_build:
      return "install: checks and buffers";
    case TraceKind::install_agree:
      return "install: agreement";
    case TraceKind::install_release:
      return "install: release";
    case TraceKind::install_engine:
      return "install: engine";
  }
  return "?";
}

}  // namespace

void TraceRecorder::start(std::string path, std::size_t max_events) {
  events_.resize(max_events);
  origin_s_ = now_s();
  path_ = std::move(path);
}

/// The trace file of `rank`: "%r" -> rank; without it ranks > 0 insert ".<rank>" before
/// the extension.
std::string trace_file(const std::string& path, int rank, int size) {
  std::string out = path;
  const std::size_t at = out.find("%r");
  if (at != std::string::npos) return out.replace(at, 2, std::to_string(rank));
  if (size == 1 || rank == 0) return out;
  const std::size_t slash = out.find_last_of('/');
  const std::size_t dot = out.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  if (!has_ext) return out + "." + std::to_string(rank);
  return out.insert(dot, "." + std::to_string(rank));
}

/// Chrome trace format (the JSON array form inside {"traceEvents": [...]}): complete
/// events ("X") on a compute and a finish lane, async events ("b"/"e") for each group's
/// queue wait and exchange (named by its collective), which overlap one another.
void TraceRecorder::write(const std::string& path, int rank, int size, std::size_t groups) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    throw Error("omgs: cannot write the trace file '" + path + "': " + std::strerror(errno));
  auto us = [this](double t) { return (t - origin_s_) * 1e6; };
  std::fprintf(f,
               "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"ranks\": %d, "
               "\"groups\": %zu, \"dropped_events\": %llu},\n\"traceEvents\": [\n",
               rank, size, groups, static_cast<unsigned long long>(dropped_));
  std::fprintf(f,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
               "\"omgs rank %d\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": "
               "{\"name\": \"compute (backward, top-k)\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 2, \"args\": "
               "{\"name\": \"finish (wait, aggregate)\"}}",
               rank, rank, rank, rank);
  for (std::size_t i = 0; i < count_; ++i) {
    const Event& e = events_[i];
    if (!(e.t1_s >= e.t0_s)) continue;  // a phase that did not happen
    const char* name = e.label != nullptr ? e.label : trace_name(e.kind);
    if (e.kind == TraceKind::queue || e.kind == TraceKind::exchange) {
      const unsigned long long id = e.iteration * 1000003ull + static_cast<unsigned>(e.group);
      std::fprintf(f,
                   ",\n{\"name\": \"%s g%d\", \"cat\": \"comm\", \"ph\": \"b\", \"id\": %llu, "
                   "\"pid\": %d, \"tid\": 3, \"ts\": %.3f, \"args\": {\"group\": %d, "
                   "\"iteration\": %llu}},\n{\"name\": \"%s g%d\", \"cat\": \"comm\", \"ph\": "
                   "\"e\", \"id\": %llu, \"pid\": %d, \"tid\": 3, \"ts\": %.3f}",
                   name, e.group, id * 2 + (e.kind == TraceKind::exchange), rank, us(e.t0_s),
                   e.group, static_cast<unsigned long long>(e.iteration), name, e.group,
                   id * 2 + (e.kind == TraceKind::exchange), rank, us(e.t1_s));
      continue;
    }
    const int tid = e.kind == TraceKind::backward || e.kind == TraceKind::sparsify ? 1 : 2;
    std::fprintf(f,
                 ",\n{\"name\": \"%s%s%s\", \"cat\": \"omgs\", \"ph\": \"X\", \"pid\": %d, "
                 "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"group\": %d, "
                 "\"iteration\": %llu}}",
                 name, e.group >= 0 ? " g" : "",
                 e.group >= 0 ? std::to_string(e.group).c_str() : "", rank, tid, us(e.t0_s),
                 (e.t1_s - e.t0_s) * 1e6, e.group, static_cast<unsigned long long>(e.iteration));
  }
  std::fprintf(f, "\n]}\n");
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) throw Error("omgs: writing the trace file '" + path + "' failed");
}

void RuntimeImpl::write_svg(const std::string& path) const {
  std::vector<LabeledTimeline> rows;
  rows.push_back({std::string(to_string(plan().planner)) + " plan, predicted", plan().predicted});
  if (iterations > 0)
    rows.push_back({"measured on rank " + std::to_string(rank) + ", iteration " +
                        std::to_string(iterations - 1),
                    loop_.measured()});
  const std::string svg = timeline_svg(
      rows, "omgs: " + std::to_string(layers.size()) + " layers, " +
                std::to_string(plan().groups.size()) + " groups, P = " + std::to_string(size) +
                ", density " + std::to_string(density_now) + "; " + model->describe());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    throw Error("omgs: cannot write the SVG file '" + path + "': " + std::strerror(errno));
  const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  if (std::fclose(f) != 0 || !ok) throw Error("omgs: writing the SVG file '" + path + "' failed");
}

}  // namespace omgs::detail

namespace omgs {

void Runtime::write_trace(const std::string& path) const {
  const detail::RuntimeImpl& r = *impl_;
  if (!path.empty()) {
    r.trace_.write(detail::trace_file(path, r.rank, r.size), r.rank, r.size,
                   r.plan().groups.size());
  } else if (!r.trace_.path().empty()) {
    r.trace_.write(r.trace_.path(), r.rank, r.size, r.plan().groups.size());
  } else {
    throw Error("omgs::Runtime::write_trace: no path given and options.trace_path is empty");
  }
}

void Runtime::write_svg(const std::string& path) const {
  impl_->write_svg(path);
}

}  // namespace omgs
