#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <type_traits>

#include <unistd.h>

#include <omgs/runtime.hpp>
#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/select.hpp>

namespace omgs {

const char* to_string(Status status) noexcept {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::unknown_layer:
      return "unknown layer";
    case Status::already_ready:
      return "layer already ready";
    case Status::not_all_ready:
      return "not every layer is ready";
    case Status::shape_mismatch:
      return "gradient view of the wrong length";
    case Status::nonfinite_gradient:
      return "non-finite gradient";
    case Status::comm_failed:
      return "communication failed";
    case Status::plan_failed:
      return "planning from the measured backward times failed";
    case Status::concurrent_call:
      return "called from two threads at once (ready/finish must be serialized)";
  }
  return "unknown status";
}

namespace detail {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A rank that cannot contribute a group (non-finite gradient) sends pairs with this index:
/// every rank sees it and skips the group, so all ranks fail the step together.
constexpr std::uint32_t failed_marker = 0xFFFFFFFFu;

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
constexpr std::uint64_t fnv_basis = 14695981039346656037ull;

std::uint64_t hash_layer(const LayerSpec& l) {
  std::uint64_t h = fnv1a(fnv_basis, l.name.data(), l.name.size());
  return fnv1a(h, &l.numel, sizeof l.numel);
}

/// Every rank passes its own verdict; if any rank failed, every rank throws (its own message,
/// or one naming the first failing rank). Never lets one rank throw alone before a collective.
void agree(MPI_Comm comm, int rank, const std::string& local_error) {
  struct {
    int failed;
    int rank;
  } in{local_error.empty() ? 0 : 1, rank}, out{0, 0};
  // The lowest failing rank: MAXLOC on failed, ties -> the lower rank.
  MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, comm);
  if (out.failed == 0) return;
  if (!local_error.empty()) throw Error(local_error);
  throw Error("omgs: rank " + std::to_string(out.rank) +
              " rejected its input (see that rank's error); every rank stops");
}

/// Elementwise max over ranks of x and of ~x, i.e. max and min of each value.
void max_min(MPI_Comm comm, const std::vector<std::uint64_t>& x, std::vector<std::uint64_t>& mx,
             std::vector<std::uint64_t>& mn) {
  std::vector<std::uint64_t> in(2 * x.size()), out(2 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    in[2 * i] = x[i];
    in[2 * i + 1] = ~x[i];
  }
  MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_UINT64_T, MPI_MAX, comm);
  mx.resize(x.size());
  mn.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    mx[i] = out[2 * i];
    mn[i] = ~out[2 * i + 1];
  }
}

std::uint64_t double_bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

struct LinearFit {
  double c0 = 0.0, c1 = 0.0;
};
LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  LinearFit f;
  const double den = n * sxx - sx * sx;
  if (den > 0) {
    f.c1 = (n * sxy - sx * sy) / den;
    f.c0 = (sy - f.c1 * sx) / n;
  }
  if (f.c0 < 0 || den <= 0) {  // through the origin
    f.c0 = 0;
    f.c1 = sxx > 0 ? sxy / sxx : 0;
  }
  if (f.c1 < 0) {
    f.c1 = 0;
    f.c0 = sy / n;
  }
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Gives every NaN entry of t the time per element of the others (0 if none is known).
void fill_by_rate(const std::vector<LayerSpec>& layers, std::vector<double>& t) {
  double known_s = 0, known_numel = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (std::isnan(t[l])) continue;
    known_s += t[l];
    known_numel += static_cast<double>(layers[l].numel);
  }
  for (std::size_t l = 0; l < layers.size(); ++l)
    if (std::isnan(t[l]))
      t[l] = known_numel > 0 ? known_s / known_numel * static_cast<double>(layers[l].numel) : 0.0;
}

constexpr double nan_s = std::numeric_limits<double>::quiet_NaN();

/// The value of environment variable `name` when options allow it and it is set.
const char* env_value(bool read_environment, const char* name) {
  if (!read_environment) return nullptr;
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

/// Applies the OMGS_* environment variables to the options (they win), and checks every
/// value; throws omgs::Error naming the variable.
void apply_environment(RuntimeOptions& o) {
  if (const char* v = env_value(o.read_environment, "OMGS_PROGRESS_CPU"))
    o.progress_pin = parse_pin_option(v, "OMGS_PROGRESS_CPU");
  if (const char* v = env_value(o.read_environment, "OMGS_GPU_AWARE_MPI"))
    o.gpu_aware = parse_gpu_aware_option(v, "OMGS_GPU_AWARE_MPI");
  if (const char* v = env_value(o.read_environment, "OMGS_TRACE")) o.trace_path = v;
  if (const char* v = env_value(o.read_environment, "OMGS_TIMEOUT_S")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !std::isfinite(t) || !(t > 0))
      throw Error(std::string("omgs: OMGS_TIMEOUT_S='") + v +
                  "' is not a positive number of seconds");
    o.wait_timeout_s = t;
  }
  if (const char* v = env_value(o.read_environment, "OMGS_ON_TIMEOUT")) {
    const std::string a = v;
    if (a == "report")
      o.on_timeout = TimeoutAction::report;
    else if (a == "abort")
      o.on_timeout = TimeoutAction::abort;
    else
      throw Error("omgs: OMGS_ON_TIMEOUT='" + a + "' is not 'report' or 'abort'");
  }
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

/// Marks a per-iteration call as running; a second thread entering meanwhile is refused
/// (Status::concurrent_call) instead of corrupting the iteration's state.
struct CallGuard {
  std::atomic<int>& flag;
  bool ok;
  explicit CallGuard(std::atomic<int>& f) noexcept
      : flag(f), ok(f.exchange(1, std::memory_order_acquire) == 0) {}
  ~CallGuard() {
    if (ok) flag.store(0, std::memory_order_release);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
};

enum class TraceKind : std::uint8_t { backward, sparsify, queue, allgather, aggregate, wait };
const char* trace_name(TraceKind k) {
  switch (k) {
    case TraceKind::backward:
      return "backward";
    case TraceKind::sparsify:
      return "sparsify";
    case TraceKind::queue:
      return "queue wait";
    case TraceKind::allgather:
      return "allgather";
    case TraceKind::aggregate:
      return "aggregate";
    case TraceKind::wait:
      return "finish wait";
  }
  return "?";
}

struct TraceEvent {
  double t0_s = 0, t1_s = 0;  // steady clock
  std::uint64_t iteration = 0;
  std::int32_t group = -1;
  TraceKind kind = TraceKind::backward;
};

}  // namespace

class RuntimeImpl {
 public:
  using Selector = TopkSelector<ExecSpace>;
  using PairView = Kokkos::View<SparsePair*, DeviceMemory>;

  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::vector<LayerSpec> layers;
  RuntimeOptions options;
  bool measuring = false;  // backward times measured (at construction: agreed by all ranks)
  bool profiling = false;  // still measuring: the plan in use is layer-wise
  int profiled = 0;
  std::vector<double> bwd_sum;  // per layer, over the profiled iterations where it was measured
  std::vector<int> bwd_count;
  std::size_t estimated_layer = 0;  // finish_timeline(): the layer whose time was estimated (or L)
  std::unique_ptr<PerfModel> model;
  CalibrationReport calibration;
  Plan plan;

  std::vector<std::size_t> layer_offset;
  std::vector<std::size_t> group_offset, group_numel, group_k, send_offset, recv_offset;
  GradientView grad, resid, agg;
  Kokkos::View<std::uint32_t*, DeviceMemory> sel_index;
  Kokkos::View<float*, DeviceMemory> sel_value;
  PairView send, recv;
  Kokkos::View<int*, DeviceMemory> bad_blocks;  // count_failed_blocks(), allocated once
  Kokkos::View<int*, DeviceMemory>::HostMirror bad_blocks_host;
  std::unique_ptr<Selector> selector;
  std::unique_ptr<ProgressEngine> engine;
  // The selector's execution space instance serves every kernel and fence: constructing
  // an instance heap-allocates in Kokkos 4, and ready() / finish() must not allocate.
  const ExecSpace& exec() const { return selector->execution_space_instance(); }

  std::vector<char> is_ready;
  std::vector<std::size_t> remaining;
  std::vector<char> failed_here;  // this rank could not contribute group g
  std::vector<char> group_done;   // finish() has dealt with group g in this iteration
  std::size_t ready_count = 0;
  double iteration_start_s = 0.0;
  IterationStats stats, current;
  std::string last_error;
  std::uint64_t iterations = 0;

  // This iteration's timestamps (steady clock seconds), all allocated at construction.
  double begin_s = nan_s;        // begin_backward()
  double last_return_s = nan_s;  // when the previous ready() (or begin_backward) returned
  std::vector<double> layer_ready_s, layer_bwd_s;  // per layer: ready() entry, its compute
  std::vector<double> topk_start_s, topk_end_s, agg_start_s, agg_end_s;  // per group
  Timeline measured;
  Diagnosis diagnosis;

  // Chrome trace.
  std::string trace_path;
  std::vector<TraceEvent> trace;
  std::size_t trace_count = 0;
  std::uint64_t trace_dropped = 0;
  double trace_origin_s = 0.0;

  ~RuntimeImpl() {
    engine.reset();  // stops the thread, frees its communicator, before ours
    if (!trace_path.empty()) {
      try {
        write_trace(trace_path);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "omgs: warning: %s\n", e.what());
      }
    }
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  std::atomic<int> in_call{0};  // ready / finish / begin_backward running (CallGuard)

  void record(TraceKind kind, int group, double t0, double t1) noexcept {
    if (trace.empty()) return;
    if (trace_count == trace.size()) {
      ++trace_dropped;
      return;
    }
    TraceEvent& e = trace[trace_count++];
    e.t0_s = t0;
    e.t1_s = t1;
    e.iteration = iterations;
    e.group = group;
    e.kind = kind;
  }

  void write_trace(const std::string& path) const;
  void finish_timeline() noexcept;
  void replan() noexcept;

  void check_agreement() {
    // One small allreduce first: a different layer count would make the per-layer one
    // mismatch in size (undefined behaviour in MPI).
    std::uint64_t h_layers = fnv_basis;
    for (const LayerSpec& l : layers) {
      const std::uint64_t hl = hash_layer(l);
      h_layers = fnv1a(h_layers, &hl, sizeof hl);
    }
    const std::uint64_t planner = static_cast<std::uint64_t>(options.planner);
    const std::uint64_t perf =
        fnv1a(fnv_basis, options.perf_model.data(), options.perf_model.size());
    const std::vector<std::uint64_t> mine = {
        layers.size(),
        h_layers,
        double_bits(options.density),
        planner,
        options.threshold_numel,
        perf,
        measuring ? 1u : 0u,
        static_cast<std::uint64_t>(options.profile_iterations)};
    std::vector<std::uint64_t> mx, mn;
    max_min(comm, mine, mx, mn);
    if (mx[0] != mn[0])
      throw Error("omgs: ranks disagree on the number of layers (between " + std::to_string(mn[0]) +
                  " and " + std::to_string(mx[0]) + "; this rank " + std::to_string(rank) +
                  " has " + std::to_string(layers.size()) + ")");
    if (mx[1] != mn[1]) {
      std::vector<std::uint64_t> per(layers.size());
      for (std::size_t i = 0; i < layers.size(); ++i) per[i] = hash_layer(layers[i]);
      std::vector<std::uint64_t> pmx, pmn;
      max_min(comm, per, pmx, pmn);
      for (std::size_t i = 0; i < layers.size(); ++i)
        if (pmx[i] != pmn[i])
          throw Error("omgs: ranks disagree on layer " + std::to_string(i) + " (this rank " +
                      std::to_string(rank) + " has '" + layers[i].name + "' with numel " +
                      std::to_string(layers[i].numel) + ")");
    }
    const char* what[] = {nullptr,
                          nullptr,
                          "density",
                          "planner",
                          "threshold_numel",
                          "perf_model",
                          "backward_times (measured on some ranks, given on others)",
                          "profile_iterations"};
    for (std::size_t i = 2; i < mine.size(); ++i)
      if (mx[i] != mn[i])
        throw Error(std::string("omgs: ranks disagree on the option ") + what[i] + " (this rank " +
                    std::to_string(rank) + ")");
  }

  void calibrate() {
    const double t_start = now_s();
    const std::uint64_t total =
        std::accumulate(layers.begin(), layers.end(), std::uint64_t{0},
                        [](std::uint64_t a, const LayerSpec& l) { return a + l.numel; });
    // Top-k on this device: a handful of sizes up to the model (capped to stay well under a
    // second); the linear fit extrapolates beyond.
    const std::uint64_t n_max =
        std::max<std::uint64_t>(1024, std::min<std::uint64_t>(total, 1u << 21));
    std::vector<std::uint64_t> sizes;
    for (std::uint64_t n = n_max; n >= 1024 && sizes.size() < 4; n /= 8) sizes.push_back(n);
    std::reverse(sizes.begin(), sizes.end());
    {
      Selector sel(n_max, selected_count(n_max, options.density));
      Kokkos::View<float*, DeviceMemory> x("omgs::calibrate::x", n_max);
      Kokkos::View<std::uint32_t*, DeviceMemory> idx("omgs::calibrate::idx", n_max);
      Kokkos::View<float*, DeviceMemory> val("omgs::calibrate::val", n_max);
      Kokkos::parallel_for(
          OMGS_LABEL("omgs::calibrate::fill"), Kokkos::RangePolicy<ExecSpace>(0, n_max),
          KOKKOS_LAMBDA(const std::uint64_t i) {
            std::uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            x(i) =
                static_cast<float>(static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0) - 0.5);
          });
      for (std::uint64_t n : sizes) {
        auto xs = Kokkos::subview(x, std::make_pair(std::uint64_t{0}, n));
        const std::size_t k = selected_count(n, options.density);
        std::vector<double> t;
        for (int r = 0; r < 4; ++r) {
          ExecSpace().fence();
          const double a = now_s();
          (void)sel.select(xs, k, idx, val);
          ExecSpace().fence();
          if (r > 0) t.push_back(now_s() - a);  // the first run warms up
        }
        calibration.topk_numel.push_back(n);
        calibration.topk_s.push_back(median(t));
      }
    }
    // Allgather of (index, value) pairs on this communicator.
    const std::size_t pairs[] = {1, 256, 4096, 32768};
    std::vector<SparsePair> sendbuf(pairs[3]), recvbuf(pairs[3] * static_cast<std::size_t>(size));
    std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
    for (std::size_t k : pairs) {
      for (int r = 0; r < size; ++r) {
        counts[static_cast<std::size_t>(r)] = static_cast<int>(k * sizeof(SparsePair));
        displs[static_cast<std::size_t>(r)] = static_cast<int>(k * sizeof(SparsePair)) * r;
      }
      std::vector<double> t;
      for (int r = 0; r < 6; ++r) {
        MPI_Barrier(comm);
        const double a = now_s();
        MPI_Request req;
        MPI_Iallgatherv(sendbuf.data(), counts[0], MPI_BYTE, recvbuf.data(), counts.data(),
                        displs.data(), MPI_BYTE, comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (r > 0) t.push_back(now_s() - a);
      }
      calibration.allgather_pairs.push_back(k);
      calibration.allgather_s.push_back(median(t));
    }
    std::vector<double> tx, ax;
    for (std::uint64_t n : calibration.topk_numel) tx.push_back(static_cast<double>(n));
    for (std::size_t k : calibration.allgather_pairs)
      ax.push_back(static_cast<double>(k) * sizeof(SparsePair) * size);
    const LinearFit topk = fit_nonnegative(tx, calibration.topk_s);
    const LinearFit ag = fit_nonnegative(ax, calibration.allgather_s);
    // The slowest rank sets the pace: every rank plans with the maximum, so plans agree.
    double local[4] = {topk.c0, topk.c1, ag.c0, ag.c1}, global[4];
    MPI_Allreduce(local, global, 4, MPI_DOUBLE, MPI_MAX, comm);
    model =
        std::make_unique<AlphaBetaModel>(TopkForm::linear, global[0], global[1],
                                         std::map<int, AlphaBeta>{{size, {global[2], global[3]}}});
    calibration.duration_s = now_s() - t_start;
  }

  void make_model() {
    std::string err;
    try {
      if (options.perf_model == "reference") {
        model = std::make_unique<ReferenceModel>();
        model->check_workers(size);
      } else if (options.perf_model != "calibrate") {
        model = make_perf_model(options.perf_model);
        model->check_workers(size);
      }
    } catch (const Error& e) {
      err = e.what();
    }
    agree(comm, rank, err);
    if (options.perf_model == "calibrate") calibrate();
  }

  void check_plan() {
    std::uint64_t h = fnv_basis;
    for (const Group& g : plan.groups) {
      h = fnv1a(h, &g.begin, sizeof g.begin);
      h = fnv1a(h, &g.end, sizeof g.end);
    }
    std::vector<std::uint64_t> mx, mn;
    max_min(comm, {h, plan.groups.size()}, mx, mn);
    if (mx[0] != mn[0])
      throw Error("omgs: ranks computed different plans (between " + std::to_string(mn[1]) +
                  " and " + std::to_string(mx[1]) + " groups; this rank " + std::to_string(rank) +
                  " has " + std::to_string(plan.groups.size()) +
                  "): their backward times or performance models differ");
  }

  void allocate_layers() {
    const std::size_t L = layers.size();
    layer_offset.assign(L + 1, 0);
    for (std::size_t l = 0; l < L; ++l) layer_offset[l + 1] = layer_offset[l] + layers[l].numel;
    const std::size_t total = layer_offset[L];
    try {
      grad = GradientView("omgs::gradient", total);
      resid = GradientView("omgs::residual", total);
      agg = GradientView("omgs::aggregated", total);
    } catch (const std::exception& e) {
      throw Error("omgs: allocating the gradient, residual and aggregated buffers (3 x " +
                  std::to_string(total) + " floats = " + std::to_string(3 * total * 4) +
                  " bytes) failed: " + e.what());
    }
    is_ready.assign(L, 0);
    layer_ready_s.assign(L, nan_s);
    layer_bwd_s.assign(L, nan_s);
    bwd_sum.assign(L, 0.0);
    bwd_count.assign(L, 0);
  }

  /// Before anything is allocated: every group must fit 32-bit indices, and on host
  /// back-ends the buffers must fit this node's physical memory (a clear error instead of
  /// an allocation failure or the OOM killer). Throws omgs::Error naming the group / sizes.
  void check_sizes() const {
    std::uint64_t total = 0, pairs = 0, max_n = 0;
    for (const LayerSpec& l : layers) total += l.numel;  // <= 2^53 (validate_layers)
    for (std::size_t g = 0; g < plan.groups.size(); ++g) {
      const Group& gr = plan.groups[g];
      if (gr.numel > Selector::max_supported_n)
        throw Error("omgs: " + group_label(g) + " has " + std::to_string(gr.numel) +
                    " elements, more than 32-bit indices address (" +
                    std::to_string(Selector::max_supported_n) +
                    "); use a planner that makes smaller groups (threshold, layerwise)");
      pairs += selected_count(gr.numel, options.density) * (1 + static_cast<std::uint64_t>(size));
      max_n = std::max<std::uint64_t>(max_n, gr.numel);
    }
    // gradient + residual + aggregated, the pairs, the selector's candidate buffers.
    const double bytes = 12.0 * static_cast<double>(total) + 8.0 * static_cast<double>(pairs) +
                         16.0 * static_cast<double>(std::max<std::uint64_t>(max_n / 8, 16384));
    if (std::is_same<DeviceMemory, Kokkos::HostSpace>::value) {
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      const double physical = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
      if (physical > 0 && bytes > physical)
        throw Error("omgs: the runtime's buffers for " + std::to_string(total) +
                    " gradient elements need " + std::to_string(bytes / 1e9) +
                    " GB on this rank, more than this node's physical memory (" +
                    std::to_string(physical / 1e9) + " GB)");
    }
  }

  /// Everything that depends on the plan: per-group offsets, send / receive pairs, the
  /// selector. Called at construction and once more after profiling.
  void allocate_groups() {
    const std::size_t G = plan.groups.size();
    group_offset.clear();
    group_numel.clear();
    group_k.clear();
    send_offset.clear();
    recv_offset.clear();
    std::size_t max_n = 1, max_k = 1, send_total = 0, recv_total = 0;
    for (std::size_t g = 0; g < G; ++g) {
      const Group& gr = plan.groups[g];
      group_offset.push_back(layer_offset[gr.begin]);
      group_numel.push_back(gr.numel);
      group_k.push_back(selected_count(gr.numel, options.density));
      send_offset.push_back(send_total);
      recv_offset.push_back(recv_total);
      send_total += group_k.back();
      recv_total += group_k.back() * static_cast<std::size_t>(size);
      max_n = std::max<std::size_t>(max_n, gr.numel);
      max_k = std::max(max_k, group_k.back());
    }
    try {
      sel_index = Kokkos::View<std::uint32_t*, DeviceMemory>("omgs::selected_index", max_k);
      sel_value = Kokkos::View<float*, DeviceMemory>("omgs::selected_value", max_k);
      send = PairView("omgs::send_pairs", send_total);
      recv = PairView("omgs::recv_pairs", recv_total);
      if (bad_blocks.extent(0) == 0) {
        bad_blocks = Kokkos::View<int*, DeviceMemory>("omgs::bad_blocks", 1);
        bad_blocks_host = Kokkos::create_mirror_view(bad_blocks);
      }
      selector = std::make_unique<Selector>(max_n, max_k);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("omgs: allocating the send / receive buffers (" + std::to_string(send_total) +
                  " + " + std::to_string(recv_total) +
                  " pairs of 8 bytes) and the top-k work "
                  "buffers failed: " +
                  e.what());
    }
    failed_here.assign(G, 0);
    group_done.assign(G, 0);
    topk_start_s.assign(G, nan_s);
    topk_end_s.assign(G, nan_s);
    agg_start_s.assign(G, nan_s);
    agg_end_s.assign(G, nan_s);
    measured = Timeline{};
    measured.groups.resize(G);
    reset_remaining();
  }

  void start_engine() {
    std::vector<GroupBuffers> buffers;
    for (std::size_t g = 0; g < plan.groups.size(); ++g)
      buffers.push_back({send.data() + send_offset[g], recv.data() + recv_offset[g], group_k[g]});
    ProgressOptions po;
    po.force_inline = options.force_inline_progress;
    po.pin = options.progress_pin;
    po.gpu_aware = options.gpu_aware;
    po.wait_timeout_s = options.wait_timeout_s;
    po.read_environment = false;  // the runtime applied (and checked) the environment
    if (!std::is_same<DeviceMemory, Kokkos::HostSpace>::value) {
      po.buffer_space = MemorySpace::device;
      po.copy_to_host = [](void* dst, const void* src, std::size_t bytes) {
        Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> d(
            static_cast<char*>(dst), bytes);
        Kokkos::View<const char*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> s(
            static_cast<const char*>(src), bytes);
        Kokkos::deep_copy(d, s);
      };
      po.copy_to_device = [](void* dst, const void* src, std::size_t bytes) {
        Kokkos::View<char*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> d(
            static_cast<char*>(dst), bytes);
        Kokkos::View<const char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> s(
            static_cast<const char*>(src), bytes);
        Kokkos::deep_copy(d, s);
      };
    }
    engine = std::make_unique<ProgressEngine>(comm, std::move(buffers), po);
  }

  /// Layer l's slot of one of the flat buffers; throws naming the accessor if l is unknown.
  GradientView layer_slice(const GradientView& flat, std::size_t l, const char* accessor) const {
    if (l >= layers.size())
      throw Error(std::string("omgs::Runtime::") + accessor + ": layer " + std::to_string(l) +
                  " does not exist (" + std::to_string(layers.size()) + " layers)");
    return Kokkos::subview(flat, std::make_pair(layer_offset[l], layer_offset[l + 1]));
  }

  /// Every group waits for all of its layers again.
  void reset_remaining() {
    remaining.resize(plan.groups.size());
    for (std::size_t g = 0; g < plan.groups.size(); ++g)
      remaining[g] = plan.groups[g].end - plan.groups[g].begin;
  }

  /// "group 3 (layers 'fc.bias' .. 'fc.weight')" for messages: backward order.
  std::string group_label(std::size_t g) const {
    const Group& gr = plan.groups[g];
    return "group " + std::to_string(g) + " (layers '" + layers[gr.end - 1].name + "' .. '" +
           layers[gr.begin].name + "')";
  }

  /// The elements of group g in one of the flat per-element buffers.
  std::pair<std::size_t, std::size_t> group_range(std::size_t g) const {
    return {group_offset[g], group_offset[g] + group_numel[g]};
  }

  /// Group g is not applied this iteration on this rank: its aggregated slot is zero and
  /// this rank's selection goes back into its residual, so no gradient mass is lost.
  void skip_group(std::size_t g) {
    restore_own_selection(g);
    fill_zero(exec(), Kokkos::subview(agg, group_range(g)));
  }

  Status fail(Status s, std::string message) {
    last_error = std::move(message);
    return s;
  }

  Status ready(std::size_t l) noexcept;
  void sparsify(std::size_t g);
  void aggregate(std::size_t g);
  void restore_own_selection(std::size_t g);
};

// Device kernels as free functions with external linkage: CUDA's extended lambdas may not
// sit in member functions or in functions with internal linkage (an anonymous namespace).
namespace kernels {

void pack_pairs(const ExecSpace& exec, Kokkos::View<SparsePair*, DeviceMemory> send,
                std::size_t offset, Kokkos::View<std::uint32_t*, DeviceMemory> idx,
                Kokkos::View<float*, DeviceMemory> val, std::size_t k, bool failed) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::pack"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::size_t i) {
        SparsePair p;
        p.index = failed ? failed_marker : idx(i);
        p.value = failed ? 0.0f : val(i);
        send(offset + i) = p;
      });
}

// Counts with atomics into a preallocated counter: Kokkos 4's parallel_reduce builds a long
// fence label (a heap allocation) at every call, whatever the result type.
int count_failed_blocks(const ExecSpace& exec, Kokkos::View<SparsePair*, DeviceMemory> recv,
                        std::size_t offset, std::size_t k, int ranks,
                        Kokkos::View<int*, DeviceMemory> count,
                        Kokkos::View<int*, DeviceMemory>::HostMirror count_host) {
  if (k == 0) return 0;
  fill_zero(exec, count);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::check_markers"), range_policy(exec, 0, ranks),
      KOKKOS_LAMBDA(const std::int64_t r) {
        if (recv(offset + static_cast<std::size_t>(r) * k).index == failed_marker)
          Kokkos::atomic_add(&count(0), 1);
      });
  Kokkos::deep_copy(exec, count_host, count);
  detail::fence(exec);
  return count_host(0);
}

void scatter_add(const ExecSpace& exec, Kokkos::View<SparsePair*, DeviceMemory> recv,
                 std::size_t recv_offset, std::size_t count, GradientView agg,
                 std::size_t group_offset, std::size_t numel, float scale) {
  auto out = Kokkos::subview(agg, std::make_pair(group_offset, group_offset + numel));
  fill_zero(exec, out);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::scatter_add"),
      range_policy(exec, 0, static_cast<std::int64_t>(count)), KOKKOS_LAMBDA(const std::size_t i) {
        const SparsePair p = recv(recv_offset + i);
        Kokkos::atomic_add(&out(p.index), p.value * scale);
      });
}

void add_back(const ExecSpace& exec, Kokkos::View<SparsePair*, DeviceMemory> send,
              std::size_t offset, std::size_t k, GradientView resid, std::size_t group_offset) {
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::runtime::restore"), range_policy(exec, 0, static_cast<std::int64_t>(k)),
      KOKKOS_LAMBDA(const std::size_t i) {
        const SparsePair p = send(offset + i);
        resid(group_offset + p.index) += p.value;
      });
}

}  // namespace kernels

void RuntimeImpl::sparsify(std::size_t g) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::sparsify"));
  const double t0 = now_s();
  topk_start_s[g] = t0;
  const auto range = group_range(g);
  const TopkResult r =
      selector->select_with_feedback(Kokkos::subview(grad, range), Kokkos::subview(resid, range),
                                     group_k[g], sel_index, sel_value);
  const bool failed = !r.ok();
  if (failed) {
    failed_here[g] = 1;
    current.nonfinite += r.nonfinite;
  }
  kernels::pack_pairs(exec(), send, send_offset[g], sel_index, sel_value, group_k[g], failed);
  detail::fence(exec());  // the pairs are complete before MPI sees them
  topk_end_s[g] = now_s();
  current.sparsify_s += topk_end_s[g] - t0;
  Kokkos::Profiling::popRegion();
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::submit"));
  // Back-pressure: the queue holds every group, so this only spins if the progress thread
  // has not yet drained the previous iteration's items.
  const double deadline = now_s() + options.wait_timeout_s;
  for (;;) {
    const SubmitStatus s = engine->submit(static_cast<int>(g));
    if (s != SubmitStatus::queue_full) break;
    engine->progress();
    if (now_s() > deadline) break;
    std::this_thread::yield();
  }
  current.bytes_sent += group_k[g] * sizeof(SparsePair);
  Kokkos::Profiling::popRegion();
}

void RuntimeImpl::restore_own_selection(std::size_t g) {
  if (failed_here[g]) return;  // select left this rank's residual untouched
  kernels::add_back(exec(), send, send_offset[g], group_k[g], resid, group_offset[g]);
}

void RuntimeImpl::aggregate(std::size_t g) {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::aggregate"));
  const double t0 = now_s();
  agg_start_s[g] = t0;
  kernels::scatter_add(exec(), recv, recv_offset[g], group_k[g] * static_cast<std::size_t>(size),
                       agg, group_offset[g], group_numel[g], 1.0f / static_cast<float>(size));
  current.bytes_received += group_k[g] * static_cast<std::size_t>(size) * sizeof(SparsePair);
  agg_end_s[g] = now_s();  // launched (complete on host back-ends; finish() fences once)
  current.aggregate_s += agg_end_s[g] - t0;
  Kokkos::Profiling::popRegion();
}

}  // namespace detail

Runtime::Runtime(MPI_Comm comm, std::vector<LayerSpec> layers, RuntimeOptions options)
    : impl_(std::make_unique<detail::RuntimeImpl>()) {
  int mpi_init = 0, mpi_final = 0;
  MPI_Initialized(&mpi_init);
  MPI_Finalized(&mpi_final);
  if (!mpi_init || mpi_final)
    throw Error("omgs::Runtime: MPI must be initialized (and not finalized)");
  if (!Kokkos::is_initialized()) throw Error("omgs::Runtime: Kokkos must be initialized");
  if (comm == MPI_COMM_NULL) throw Error("omgs::Runtime: the communicator is MPI_COMM_NULL");
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::init"));
  auto& s = *impl_;
  MPI_Comm_dup(comm, &s.comm);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  s.layers = std::move(layers);
  s.options = std::move(options);
  // Local checks first; the verdict is agreed before any other collective, so a bad input
  // on one rank makes every rank throw instead of leaving the others in a collective.
  std::string err, trace_path;
  try {
    detail::apply_environment(s.options);
    validate_layers(s.layers);
    validate_density(s.options.density);
    if (s.options.planner == Planner::threshold && s.options.threshold_numel == 0)
      throw Error("omgs: the threshold planner needs threshold_numel > 0");
    if (!(s.options.wait_timeout_s > 0) || !std::isfinite(s.options.wait_timeout_s))
      throw Error("omgs: wait_timeout_s must be a positive number of seconds");
    if (!(s.options.watchdog_query_s > 0) || !std::isfinite(s.options.watchdog_query_s))
      throw Error("omgs: watchdog_query_s must be a positive number of seconds");
    bool all_zero = true;
    for (const LayerSpec& l : s.layers) all_zero = all_zero && l.backward_s == 0.0;
    s.measuring = s.options.backward_times == BackwardTimes::measure ||
                  (s.options.backward_times == BackwardTimes::automatic && all_zero);
    if (s.measuring && s.options.profile_iterations < 1)
      throw Error("omgs: profile_iterations must be >= 1 to measure backward times (it is " +
                  std::to_string(s.options.profile_iterations) + ")");
    if (!s.options.trace_path.empty()) {
      trace_path = detail::trace_file(s.options.trace_path, s.rank, s.size);
      // Fail now, not after a long run: the trace file must be writable.
      std::FILE* f = std::fopen(trace_path.c_str(), "wb");
      if (f == nullptr)
        throw Error("omgs: cannot write the trace file '" + trace_path +
                    "': " + std::strerror(errno));
      std::fclose(f);
    }
  } catch (const Error& e) {
    err = e.what();
  }
  detail::agree(s.comm, s.rank, err);
  s.check_agreement();
  s.make_model();
  s.profiling = s.measuring;
  const PlanConfig config{s.size, s.options.density, s.options.threshold_numel};
  // While profiling every layer is its own group: training proceeds, and ready() spacing
  // measures each layer's backward time.
  s.plan =
      make_plan(s.profiling ? Planner::layerwise : s.options.planner, s.layers, *s.model, config);
  s.check_plan();
  // A rank that cannot allocate must not leave the others in the engine's collectives.
  try {
    s.check_sizes();
    s.allocate_layers();
    s.allocate_groups();
  } catch (const Error& e) {
    err = e.what();
  }
  detail::agree(s.comm, s.rank, err);
  s.start_engine();
  if (!trace_path.empty()) {
    s.trace.resize(std::max<std::size_t>(s.options.trace_max_events, 1));
    s.trace_origin_s = detail::now_s();
    s.trace_path = trace_path;  // from now on the destructor writes it
  }
  Kokkos::Profiling::popRegion();
}

Runtime::~Runtime() = default;

std::size_t Runtime::num_layers() const noexcept {
  return impl_->layers.size();
}

GradientView Runtime::gradient(std::size_t l) const {
  return impl_->layer_slice(impl_->grad, l, "gradient");
}

ConstGradientView Runtime::aggregated(std::size_t l) const {
  return impl_->layer_slice(impl_->agg, l, "aggregated");
}

ConstGradientView Runtime::residual(std::size_t l) const {
  return impl_->layer_slice(impl_->resid, l, "residual");
}

void Runtime::begin_backward() noexcept {
  auto& s = *impl_;
  detail::CallGuard guard(s.in_call);
  if (!guard.ok) return;
  s.begin_s = detail::now_s();
  s.last_return_s = s.begin_s;
}

Status Runtime::ready(std::size_t l) noexcept {
  detail::CallGuard guard(impl_->in_call);
  if (!guard.ok) return Status::concurrent_call;
  return impl_->ready(l);
}

Status detail::RuntimeImpl::ready(std::size_t l) noexcept {
  auto& s = *this;
  const double t_in = detail::now_s();
  if (l >= s.layers.size())
    return s.fail(Status::unknown_layer, "omgs: ready(" + std::to_string(l) + "): there are only " +
                                             std::to_string(s.layers.size()) + " layers");
  if (s.is_ready[l])
    return s.fail(Status::already_ready, "omgs: ready(" + std::to_string(l) + "): layer '" +
                                             s.layers[l].name +
                                             "' is already ready in this iteration");
  if (s.ready_count == 0) {
    s.current = IterationStats{};
    s.iteration_start_s = std::isnan(s.begin_s) ? t_in : s.begin_s;
  }
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::ready"));
  s.is_ready[l] = 1;
  ++s.ready_count;
  // The training code computed this layer between the previous ready() and this one.
  s.layer_ready_s[l] = t_in;
  s.layer_bwd_s[l] = t_in - s.last_return_s;  // NaN for the first, without begin_backward
  const std::size_t g = s.plan.group_of_layer[l];
  if (--s.remaining[g] == 0) s.sparsify(g);
  s.last_return_s = detail::now_s();
  Kokkos::Profiling::popRegion();
  return Status::ok;
}

Status Runtime::ready(std::size_t l, const ConstGradientView& grad) noexcept {
  auto& s = *impl_;
  detail::CallGuard guard(s.in_call);
  if (!guard.ok) return Status::concurrent_call;
  if (l >= s.layers.size()) return s.ready(l);
  if (grad.extent(0) != s.layers[l].numel)
    return s.fail(Status::shape_mismatch,
                  "omgs: ready(" + std::to_string(l) + ", view): layer '" + s.layers[l].name +
                      "' has " + std::to_string(s.layers[l].numel) + " elements, the view " +
                      std::to_string(grad.extent(0)));
  if (s.is_ready[l]) return s.ready(l);
  Kokkos::deep_copy(s.layer_slice(s.grad, l, "ready"), grad);
  return s.ready(l);
}

IterationStats Runtime::finish() noexcept {
  auto& s = *impl_;
  detail::CallGuard guard(s.in_call);
  if (!guard.ok) {
    IterationStats r;
    r.status = Status::concurrent_call;
    return r;
  }
  IterationStats& st = s.current;
  if (s.ready_count < s.layers.size()) {
    std::size_t missing = s.layers.size();
    for (std::size_t l = s.layers.size(); l-- > 0;)
      if (!s.is_ready[l]) {
        missing = l;
        break;
      }
    IterationStats r = st;
    r.status =
        s.fail(Status::not_all_ready, "omgs: finish(): layer " + std::to_string(missing) + " '" +
                                          s.layers[missing].name + "' (and " +
                                          std::to_string(s.layers.size() - s.ready_count - 1) +
                                          " more) not ready; call ready() for them, then finish()");
    return r;
  }
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::finish"));
  const double finish_start = detail::now_s();
  for (std::size_t g = 0; g < s.plan.groups.size(); ++g) {
    if (s.group_done[g]) continue;  // a retried finish() after a timeout
    const double t0 = detail::now_s();
    Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::finish::wait"));
    const WaitStatus w = s.engine->wait(static_cast<int>(g), s.options.wait_timeout_s);
    Kokkos::Profiling::popRegion();
    st.finish_wait_s += detail::now_s() - t0;
    if (w == WaitStatus::timeout) {
      // The watchdog: ask every rank how far it got, name the ones holding the group up.
      s.diagnosis = s.engine->diagnose(static_cast<int>(g), s.options.watchdog_query_s);
      s.last_error = "omgs: finish(): " + s.group_label(g) + " did not complete within " +
                     std::to_string(s.options.wait_timeout_s) + " s. " + s.diagnosis.report;
      Kokkos::Profiling::popRegion();
      if (s.options.on_timeout == TimeoutAction::abort) {
        std::fprintf(stderr, "%s\nomgs: aborting the job (on_timeout = abort)\n",
                     s.last_error.c_str());
        std::fflush(stderr);
        MPI_Abort(s.comm, 3);
      }
      s.last_error += " The iteration is still open: call finish() again to keep waiting.";
      IterationStats r = st;
      r.status = Status::comm_failed;
      r.failed_group = static_cast<int>(g);
      return r;
    }
    s.group_done[g] = 1;
    if (w != WaitStatus::ok) {
      // MPI failed the collective (or it was never submitted): its pairs are not valid.
      s.skip_group(g);
      if (st.status == Status::ok) {
        st.status = Status::comm_failed;
        st.failed_group = static_cast<int>(g);
        s.last_error = "omgs: finish(): the allgather of " + s.group_label(g) + " " +
                       (w == WaitStatus::failed
                            ? "completed with an MPI error; this rank's communicator is no "
                              "longer usable and every later group fails"
                            : "was never submitted") +
                       "; this rank's selection was kept in its residual";
      }
      continue;
    }
    const int bad = detail::kernels::count_failed_blocks(
        s.exec(), s.recv, s.recv_offset[g], s.group_k[g], s.size, s.bad_blocks, s.bad_blocks_host);
    if (bad > 0) {
      // Some rank could not contribute: no rank applies this group; healthy ranks keep their
      // selection in the residual, so no gradient mass is lost.
      s.skip_group(g);
      if (st.status == Status::ok) {
        st.status = Status::nonfinite_gradient;
        st.failed_group = static_cast<int>(g);
        s.last_error = "omgs: " + s.group_label(g) + " held non-finite values on " +
                       std::to_string(bad) + " rank(s) (" + std::to_string(st.nonfinite) +
                       " non-finite values in this rank's groups of this iteration); the "
                       "step is skipped for it on every rank";
      }
      continue;
    }
    s.aggregate(g);
  }
  detail::fence(s.exec());
  Kokkos::Profiling::popRegion();
  const double finish_end = detail::now_s();
  s.record(detail::TraceKind::wait, -1, finish_start, finish_end);
  s.finish_timeline();
  st.iteration_s = finish_end - s.iteration_start_s;
  st.iteration = s.iterations++;
  st.profiling = s.profiling;
  std::fill(s.is_ready.begin(), s.is_ready.end(), 0);
  std::fill(s.failed_here.begin(), s.failed_here.end(), 0);
  std::fill(s.group_done.begin(), s.group_done.end(), 0);
  s.reset_remaining();
  s.ready_count = 0;
  s.begin_s = detail::nan_s;
  s.last_return_s = detail::nan_s;
  if (s.profiling) {
    for (std::size_t l = 0; l < s.layers.size(); ++l) {
      if (l == s.estimated_layer) continue;  // not measured in this iteration
      s.bwd_sum[l] += s.layer_bwd_s[l];
      ++s.bwd_count[l];
    }
    // Every rank finishes the same iterations, so every rank replans at the same one.
    if (++s.profiled == s.options.profile_iterations) {
      s.replan();
      st.replanned = !s.profiling;
      if (s.profiling) {
        st.status = Status::plan_failed;
        s.profiling = false;  // keep the layer-wise plan; do not try again
      }
    }
  }
  s.stats = st;
  return st;
}

namespace detail {

/// The measured pipeline of the iteration just finished, in the form of Plan::predicted,
/// and its trace events. A layer whose compute time is unknown (the first ready() without
/// begin_backward()) gets the time per element of the others.
void RuntimeImpl::finish_timeline() noexcept {
  estimated_layer = layers.size();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (std::isnan(layer_bwd_s[l])) {
      // Its mean so far if it was ever measured, else (below) the others' time per element.
      estimated_layer = l;
      if (bwd_count[l] > 0) layer_bwd_s[l] = bwd_sum[l] / bwd_count[l];
    } else {
      layer_bwd_s[l] = std::max(0.0, layer_bwd_s[l]);
    }
  }
  fill_by_rate(layers, layer_bwd_s);
  double origin = std::numeric_limits<double>::infinity();
  for (std::size_t l = 0; l < layers.size(); ++l)
    origin = std::min(origin, layer_ready_s[l] - layer_bwd_s[l]);
  measured.compute_end_s = 0;
  measured.iteration_end_s = 0;
  measured.comm_total_s = 0;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& gr = plan.groups[g];
    double bstart = std::numeric_limits<double>::infinity();
    for (std::size_t l = gr.begin; l < gr.end; ++l)
      bstart = std::min(bstart, layer_ready_s[l] - layer_bwd_s[l]);
    const GroupTimes ct = engine->group_times(static_cast<int>(g));
    GroupTiming& t = measured.groups[g];
    t.backward_start_s = bstart - origin;
    t.topk_start_s = topk_start_s[g] - origin;
    t.topk_end_s = topk_end_s[g] - origin;
    t.comm_start_s = ct.post_s - origin;
    t.comm_end_s = ct.complete_s - origin;
    measured.compute_end_s = std::max(measured.compute_end_s, t.topk_end_s);
    measured.iteration_end_s = std::max(measured.iteration_end_s, t.comm_end_s);
    measured.comm_total_s += t.comm_end_s - t.comm_start_s;
    record(TraceKind::backward, static_cast<int>(g), bstart, topk_start_s[g]);
    record(TraceKind::sparsify, static_cast<int>(g), topk_start_s[g], topk_end_s[g]);
    record(TraceKind::queue, static_cast<int>(g), ct.submit_s, ct.post_s);
    record(TraceKind::allgather, static_cast<int>(g), ct.post_s, ct.complete_s);
    if (!std::isnan(agg_start_s[g]))
      record(TraceKind::aggregate, static_cast<int>(g), agg_start_s[g], agg_end_s[g]);
    agg_start_s[g] = agg_end_s[g] = nan_s;
  }
  measured.non_overlapped_comm_s = std::max(0.0, measured.iteration_end_s - measured.compute_end_s);
}

/// After profiling: average the measured backward times over iterations and ranks (rank
/// 0's reduction, broadcast, so every rank plans with bit-identical inputs), plan with the
/// chosen planner, check the plan everywhere, and rebuild what depends on the groups.
/// Collective; every rank calls it at the same iteration. On failure `profiling` stays
/// true and the layer-wise plan is kept.
void RuntimeImpl::replan() noexcept {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::replan"));
  const std::size_t L = layers.size();
  const Plan previous = plan;
  try {
    engine.reset();  // idle (finish() waited for every group); stops the thread first
    std::vector<double> mean(L), sum(L, 0.0);
    for (std::size_t l = 0; l < L; ++l)
      mean[l] = bwd_count[l] > 0 ? bwd_sum[l] / bwd_count[l] : nan_s;
    // A layer never measured (always the first ready() without begin_backward) gets the
    // time per element of the others.
    fill_by_rate(layers, mean);
    MPI_Reduce(mean.data(), sum.data(), static_cast<int>(L), MPI_DOUBLE, MPI_SUM, 0, comm);
    if (rank == 0)
      for (double& x : sum) x = std::isfinite(x) && x > 0 ? x / size : 0.0;
    MPI_Bcast(sum.data(), static_cast<int>(L), MPI_DOUBLE, 0, comm);
    std::vector<LayerSpec> measured_layers = layers;
    for (std::size_t l = 0; l < L; ++l) measured_layers[l].backward_s = sum[l];
    const PlanConfig config{size, options.density, options.threshold_numel};
    std::string err;
    try {
      plan = make_plan(options.planner, measured_layers, *model, config);
    } catch (const std::exception& e) {
      err = e.what();
      plan = previous;
    }
    agree(comm, rank, err);
    check_plan();
    try {
      check_sizes();
      allocate_groups();
    } catch (const Error& e) {
      err = e.what();
    }
    agree(comm, rank, err);
    layers = std::move(measured_layers);
    start_engine();
    profiling = false;
  } catch (const std::exception& e) {
    last_error = std::string("omgs: planning with the measured backward times failed (") +
                 e.what() + "); communication stays layer-wise";
    try {
      plan = previous;
      allocate_groups();
      if (!engine) start_engine();
    } catch (const std::exception& e2) {
      last_error += std::string("; restoring it failed too: ") + e2.what();
    }
  }
  Kokkos::Profiling::popRegion();
}

/// Chrome trace format (the JSON array form inside {"traceEvents": [...]}): complete
/// events ("X") on a compute and a finish lane, async events ("b"/"e") for each group's
/// queue wait and allgather, which overlap one another.
void RuntimeImpl::write_trace(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    throw Error("omgs: cannot write the trace file '" + path + "': " + std::strerror(errno));
  auto us = [this](double t) { return (t - trace_origin_s) * 1e6; };
  std::fprintf(f,
               "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"ranks\": %d, "
               "\"groups\": %zu, \"dropped_events\": %llu},\n\"traceEvents\": [\n",
               rank, size, plan.groups.size(), static_cast<unsigned long long>(trace_dropped));
  std::fprintf(f,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
               "\"omgs rank %d\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": "
               "{\"name\": \"compute (backward, top-k)\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 2, \"args\": "
               "{\"name\": \"finish (wait, aggregate)\"}}",
               rank, rank, rank, rank);
  for (std::size_t i = 0; i < trace_count; ++i) {
    const TraceEvent& e = trace[i];
    if (!(e.t1_s >= e.t0_s)) continue;  // a phase that did not happen
    const char* name = trace_name(e.kind);
    if (e.kind == TraceKind::queue || e.kind == TraceKind::allgather) {
      const unsigned long long id = e.iteration * 1000003ull + static_cast<unsigned>(e.group);
      std::fprintf(f,
                   ",\n{\"name\": \"%s g%d\", \"cat\": \"comm\", \"ph\": \"b\", \"id\": %llu, "
                   "\"pid\": %d, \"tid\": 3, \"ts\": %.3f, \"args\": {\"group\": %d, "
                   "\"iteration\": %llu}},\n{\"name\": \"%s g%d\", \"cat\": \"comm\", \"ph\": "
                   "\"e\", \"id\": %llu, \"pid\": %d, \"tid\": 3, \"ts\": %.3f}",
                   name, e.group, id * 2 + (e.kind == TraceKind::allgather), rank, us(e.t0_s),
                   e.group, static_cast<unsigned long long>(e.iteration), name, e.group,
                   id * 2 + (e.kind == TraceKind::allgather), rank, us(e.t1_s));
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

}  // namespace detail

bool Runtime::profiling() const noexcept {
  return impl_->profiling;
}

const Timeline& Runtime::measured() const noexcept {
  return impl_->measured;
}

const Diagnosis& Runtime::last_diagnosis() const noexcept {
  return impl_->diagnosis;
}

void Runtime::write_trace(const std::string& path) const {
  const auto& s = *impl_;
  if (!path.empty()) {
    s.write_trace(detail::trace_file(path, s.rank, s.size));
  } else if (!s.trace_path.empty()) {
    s.write_trace(s.trace_path);
  } else {
    throw Error("omgs::Runtime::write_trace: no path given and options.trace_path is empty");
  }
}

void Runtime::write_svg(const std::string& path) const {
  const auto& s = *impl_;
  std::vector<LabeledTimeline> rows;
  rows.push_back({std::string(to_string(s.plan.planner)) + " plan, predicted", s.plan.predicted});
  if (s.iterations > 0)
    rows.push_back({"measured on rank " + std::to_string(s.rank) + ", iteration " +
                        std::to_string(s.iterations - 1),
                    s.measured});
  const std::string svg = timeline_svg(
      rows, "omgs: " + std::to_string(s.layers.size()) + " layers, " +
                std::to_string(s.plan.groups.size()) + " groups, P = " + std::to_string(s.size) +
                ", density " + std::to_string(s.options.density) + "; " + s.model->describe());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    throw Error("omgs: cannot write the SVG file '" + path + "': " + std::strerror(errno));
  const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  if (std::fclose(f) != 0 || !ok) throw Error("omgs: writing the SVG file '" + path + "' failed");
}

const Plan& Runtime::plan() const noexcept {
  return impl_->plan;
}
const std::vector<LayerSpec>& Runtime::layers() const noexcept {
  return impl_->layers;
}
const PerfModel& Runtime::perf_model() const noexcept {
  return *impl_->model;
}
const CalibrationReport& Runtime::calibration() const noexcept {
  return impl_->calibration;
}
const IterationStats& Runtime::last_stats() const noexcept {
  return impl_->stats;
}
RuntimeStats Runtime::stats() const {
  return {impl_->stats, impl_->measured, impl_->engine->stats()};
}
ProgressStats Runtime::progress_stats() const {
  return impl_->engine->stats();
}
std::size_t Runtime::group_k(std::size_t g) const {
  return impl_->group_k.at(g);
}
const std::string& Runtime::last_error() const noexcept {
  return impl_->last_error;
}
int Runtime::rank() const noexcept {
  return impl_->rank;
}
int Runtime::size() const noexcept {
  return impl_->size;
}

}  // namespace omgs
