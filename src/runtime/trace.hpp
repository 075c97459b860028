// Internal: the Chrome trace of measured events (trace.cpp): a fixed buffer of events,
// written at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace omgs::detail {

enum class TraceKind : std::uint8_t {
  backward,
  sparsify,
  queue,
  exchange,  // a group's collective, from its post to its completion; labelled by its name
  aggregate,
  wait,
  refit,   // the closed loop refitted the model (kept the plan)
  replan,  // ... and switched plans
  // The parts of a refit and of a plan install (group -1), nested in the events above:
  refit_fit,        // the refit's collectives (agreed medians, the fit made certain) and fit
  install_build,    // the new instance's checks and buffers (allocation, no collective)
  install_agree,    // the agreement on the build's verdict (an allreduce)
  install_release,  // the instance in force gives up its groups (residuals; its engine)
  install_engine,   // the engine takes the new groups (its set-up collectives included)
};

class TraceRecorder {
 public:
  /// Starts recording into `max_events` slots; the destructor of the runtime writes `path`.
  void start(std::string path, std::size_t max_events);
  /// `label`: a string literal (it outlives the recorder), e.g. the collective of an
  /// exchange event; null for the kind's own name.
  void record(TraceKind kind, std::uint64_t iteration, int group, double t0, double t1,
              const char* label = nullptr) noexcept {
    if (events_.empty()) return;
    if (count_ == events_.size()) {
      ++dropped_;
      return;
    }
    events_[count_++] = {t0, t1, iteration, group, kind, label};
  }
  const std::string& path() const noexcept { return path_; }
  void write(const std::string& path, int rank, int size, std::size_t groups) const;

 private:
  struct Event {
    double t0_s = 0, t1_s = 0;  // now_s()
    std::uint64_t iteration = 0;
    std::int32_t group = -1;
    TraceKind kind = TraceKind::backward;
    const char* label = nullptr;
  };
  std::string path_;
  std::vector<Event> events_;
  std::size_t count_ = 0;
  std::uint64_t dropped_ = 0;
  double origin_s_ = 0.0;
};

/// The trace file of `rank`: "%r" -> rank; without it ranks > 0 insert ".<rank>" before
/// the extension.
std::string trace_file(const std::string& path, int rank, int size);

}  // namespace omgs::detail
