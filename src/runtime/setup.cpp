// The runtime's set-up: local checks of the input and the environment, the verdict and the
// fingerprints agreed across ranks, the choice of performance model, the first plan.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/pair_format.hpp>

#include "comm/environment.hpp"

#include "plan/collective_table.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

namespace {

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

// The allowed collectives by name: a registered collective's id may differ between ranks.
std::uint64_t hash_collectives(const CollectiveSet& set) {
  std::uint64_t h = fnv_basis;
  for (std::size_t i = 0; i < 256; ++i)
    if (set.contains(static_cast<Collective>(i))) {
      const std::string_view name = to_string(static_cast<Collective>(i));
      h = fnv1a(fnv1a(h, name.data(), name.size()), ";", 1);
    }
  return h;
}

/// Applies the OMGS_* environment variables to the options (they win), and checks every
/// value; throws omgs::Error naming the variable.
void apply_environment(RuntimeOptions& o) {
  if (!o.read_environment) return;
  const RuntimeEnvironment env = read_runtime_environment();
  apply_if_set(o.progress_pin, env.progress_pin);
  apply_if_set(o.gpu_aware, env.gpu_aware);
  apply_if_set(o.trace_path, env.trace_path);
  apply_if_set(o.wait_timeout_s, env.wait_timeout_s);
  apply_if_set(o.shutdown_timeout_s, env.shutdown_timeout_s);
  apply_if_set(o.refit_iterations, env.refit_iterations);
  apply_if_set(o.max_replans, env.max_replans);
  apply_if_set(o.replan_min_gain, env.replan_min_gain);
  apply_if_set(o.sparse_exchange, env.sparse_exchange);
  apply_if_set(o.dense_allreduce, env.dense_allreduce);
  apply_if_set(o.memory_budget_bytes, env.memory_budget_bytes);
  apply_if_set(o.collectives, env.collectives);
  apply_if_set(o.ranks_per_node, env.ranks_per_node);
  if (env.abort_on_timeout)
    o.on_timeout = *env.abort_on_timeout ? TimeoutAction::abort : TimeoutAction::report;
  if (env.pair_wire) o.pair_wire = parse_pair_wire(*env.pair_wire);
  apply_if_set(o.dense_wire, env.dense_wire);
}

/// The names of check_agreement's fingerprints, in its order (the first two, the layers,
/// have their own messages).
constexpr const char* agreed_option_names[] = {
    nullptr,
    nullptr,
    "density",
    "planner",
    "threshold_numel",
    "perf_model",
    "backward_times (measured on some ranks, given on others)",
    "profile_iterations",
    "refit_iterations",
    "max_replans",
    "replan_min_gain",
    "sparse_exchange",
    "warmup_density",
    "warmup_iterations",
    "warmup_stages",
    "momentum",
    "clip_norm",
    "pair_wire",
    "dense_allreduce",
    "gradient_type",
    "collectives",
    "memory_budget_bytes",
    "ranks_per_node",
    "dense_wire"};

/// Before the communicator is duplicated: MPI and Kokkos usable, the communicator valid.
MPI_Comm checked_comm(MPI_Comm comm) {
  require_mpi_active("omgs::Runtime");
  if (!Kokkos::is_initialized()) throw Error("omgs::Runtime: Kokkos must be initialized");
  if (comm == MPI_COMM_NULL) throw Error("omgs::Runtime: the communicator is MPI_COMM_NULL");
  return comm;
}

/// The bound of the first agreement: wait_timeout_s after the environment, or its default
/// if the options are invalid (that is reported once every rank has arrived).
double arrival_timeout_s(const RuntimeOptions& options) {
  RuntimeOptions o = options;
  try {
    apply_environment(o);
  } catch (const Error&) {
    o = options;
  }
  return o.wait_timeout_s > 0 && std::isfinite(o.wait_timeout_s) ? o.wait_timeout_s
                                                                 : RuntimeOptions{}.wait_timeout_s;
}

}  // namespace

RuntimeImpl::RuntimeImpl(MPI_Comm user_comm, std::vector<LayerSpec> user_layers,
                         RuntimeOptions user_options) {
  // The first collective is bounded: a rank that never constructs the runtime makes the
  // others throw instead of waiting forever.
  owned_comm = std::make_unique<OwnedComm>(checked_comm(user_comm), arrival_timeout_s(user_options),
                                           "omgs::Runtime");
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::init"));
  comm = owned_comm->get();
  rank = owned_comm->rank();
  size = owned_comm->size();
  layers = std::move(user_layers);
  options = std::move(user_options);
  // Local checks first; the verdict is agreed before any other collective, so a bad input
  // on one rank makes every rank throw instead of leaving the others in a collective.
  std::string trace_path;
  agree_on_error(comm, check_local_input(trace_path), "omgs");
  check_agreement();
  choose_dense_allreduce();
  start_schedule();
  make_model();
  Plan first = initial_plan();
  node_ranks = ranks_on_node(comm);
  // A rank that cannot allocate must not leave the others in the engine's collectives.
  std::string err;
  try {
    check_sizes(first);  // before the flat buffers: their size is checked there
    allocate_layers();
    allocate_prep();
    allocate_gradient16();
    loop_.start(options, layers.size(), measuring);
  } catch (const Error& e) {
    err = e.what();
  }
  agree_on_error(comm, err, "omgs");
  install_plan(std::move(first));
  finalize_hook = std::make_unique<FinalizeHook>([this] { stop_at_finalize(); });
  if (!trace_path.empty())  // from now on the destructor writes it
    trace_.start(trace_path, std::max<std::size_t>(options.trace_max_events, 1));
  Kokkos::Profiling::popRegion();
}

RuntimeImpl::~RuntimeImpl() {
  if (mpi_finalized())
    std::fprintf(stderr,
                 "omgs: warning: Runtime destroyed after MPI_Finalize; its progress thread was "
                 "stopped at MPI_Finalize; destroy the Runtime before MPI_Finalize\n");
  else
    finalize_hook.reset();
  if (instance_) instance_->engine.reset();  // stops the thread, frees its communicators
  write_trace_file();
  if (!Kokkos::is_initialized()) {
    // Freeing a Kokkos view after Kokkos::finalize crashes: keep them, on purpose.
    std::fprintf(stderr,
                 "omgs: warning: Runtime destroyed after Kokkos::finalize; its Kokkos views are "
                 "leaked on purpose - destroy the Runtime before Kokkos::finalize\n");
    (void)instance_.release();
    (void)new FlatBuffers(std::move(flat_));
  }
}

/// At the start of MPI_Finalize with the runtime alive: the progress thread stops and every
/// communicator is freed, so no MPI call is made afterwards (the destructor only warns).
void RuntimeImpl::stop_at_finalize() {
  if (instance_) instance_->engine.reset();
  owned_comm.reset();
  comm = MPI_COMM_NULL;
}

void RuntimeImpl::write_trace_file() noexcept {
  if (trace_.path().empty()) return;
  try {
    trace_.write(trace_.path(), rank, size, instance_ ? plan().groups.size() : 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "omgs: warning: %s\n", e.what());
  }
}

/// This rank's verdict on its input and environment ("" if fine); decides whether backward
/// times are measured and, with a trace, its file (checked writable now, not after a run).
std::string RuntimeImpl::check_local_input(std::string& trace_path) {
  try {
    apply_environment(options);
    validate_layers(layers);
    validate_density(options.density);
    check_schedule_options();
    if (options.planner == Planner::threshold && options.threshold_numel == 0)
      throw Error("omgs: the threshold planner needs threshold_numel > 0");
    if (!(options.wait_timeout_s > 0) || !std::isfinite(options.wait_timeout_s))
      throw Error("omgs: wait_timeout_s must be a positive number of seconds");
    if (!(options.shutdown_timeout_s > 0) || !std::isfinite(options.shutdown_timeout_s))
      throw Error("omgs: shutdown_timeout_s must be a positive number of seconds");
    if (!(options.watchdog_query_s > 0) || !std::isfinite(options.watchdog_query_s))
      throw Error("omgs: watchdog_query_s must be a positive number of seconds");
    if (options.refit_iterations < 0 || options.max_replans < 0)
      throw Error("omgs: refit_iterations and max_replans must be >= 0 (they are " +
                  std::to_string(options.refit_iterations) + " and " +
                  std::to_string(options.max_replans) + ")");
    if (options.dense_allreduce == DenseAllreduce::blocking &&
        !progress_thread_available(options.force_inline_progress))
      throw Error(
          "omgs: dense_allreduce = blocking needs the progress thread (MPI initialized with "
          "MPI_THREAD_SERIALIZED or above, force_inline_progress off)");
    if (!(options.replan_min_gain >= 0) || !std::isfinite(options.replan_min_gain))
      throw Error("omgs: replan_min_gain must be a finite number >= 0");
    if (options.pair_wire > PairWire::fp16)
      throw Error("omgs: pair_wire has an unknown value (" +
                  std::to_string(static_cast<int>(options.pair_wire)) + ")");
    for (std::size_t i = 0; i < 256; ++i)  // each allowed collective has a row (or throws)
      if (options.collectives.contains(static_cast<Collective>(i)))
        detail::collective_row(static_cast<Collective>(i));
    if (options.dense_wire > DenseWire::fp16)
      throw Error("omgs: dense_wire has an unknown value (" +
                  std::to_string(static_cast<int>(options.dense_wire)) + ")");
    if (options.gradient_type > GradientType::fp16)
      throw Error("omgs: gradient_type has an unknown value (" +
                  std::to_string(static_cast<int>(options.gradient_type)) + ")");
    bool all_zero = true;
    for (const LayerSpec& l : layers) all_zero = all_zero && l.backward_s == 0.0;
    measuring = options.backward_times == BackwardTimes::measure ||
                (options.backward_times == BackwardTimes::automatic && all_zero);
    if (measuring && options.profile_iterations < 1)
      throw Error("omgs: profile_iterations must be >= 1 to measure backward times (it is " +
                  std::to_string(options.profile_iterations) + ")");
    if (!options.trace_path.empty()) {
      trace_path = trace_file(options.trace_path, rank, size);
      std::FILE* f = std::fopen(trace_path.c_str(), "wb");
      if (f == nullptr)
        throw Error("omgs: cannot write the trace file '" + trace_path +
                    "': " + std::strerror(errno));
      std::fclose(f);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// While profiling every layer is its own group: training proceeds, and ready() spacing
/// measures each layer's backward time.
Plan RuntimeImpl::initial_plan() {
  return make_plan(measuring ? Planner::layerwise : options.planner, layers, *model, plan_config());
}

void RuntimeImpl::check_agreement() {
  // One small allreduce first: a different layer count would make the per-layer one
  // mismatch in size (undefined behaviour in MPI).
  std::uint64_t h_layers = fnv_basis;
  for (const LayerSpec& l : layers) {
    const std::uint64_t hl = hash_layer(l);
    h_layers = fnv1a(h_layers, &hl, sizeof hl);
  }
  const std::uint64_t planner = static_cast<std::uint64_t>(options.planner);
  const std::uint64_t perf = fnv1a(fnv_basis, options.perf_model.data(), options.perf_model.size());
  const std::uint64_t allowed = hash_collectives(options.collectives);
  const std::vector<std::uint64_t> mine = {layers.size(),
                                           h_layers,
                                           double_bits(options.density),
                                           planner,
                                           options.threshold_numel,
                                           perf,
                                           measuring ? 1u : 0u,
                                           static_cast<std::uint64_t>(options.profile_iterations),
                                           static_cast<std::uint64_t>(options.refit_iterations),
                                           static_cast<std::uint64_t>(options.max_replans),
                                           double_bits(options.replan_min_gain),
                                           static_cast<std::uint64_t>(options.sparse_exchange),
                                           double_bits(options.warmup_density),
                                           options.warmup_iterations,
                                           static_cast<std::uint64_t>(options.warmup_stages),
                                           double_bits(options.momentum),
                                           double_bits(options.clip_norm),
                                           static_cast<std::uint64_t>(options.pair_wire),
                                           static_cast<std::uint64_t>(options.dense_allreduce),
                                           static_cast<std::uint64_t>(options.gradient_type),
                                           allowed,
                                           options.memory_budget_bytes,
                                           static_cast<std::uint64_t>(options.ranks_per_node),
                                           static_cast<std::uint64_t>(options.dense_wire)};
  std::vector<std::uint64_t> mx, mn;
  max_min(comm, mine, mx, mn);
  if (mx[0] != mn[0])
    throw Error("omgs: ranks disagree on the number of layers (between " + std::to_string(mn[0]) +
                " and " + std::to_string(mx[0]) + "; this rank " + std::to_string(rank) + " has " +
                std::to_string(layers.size()) + ")");
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
  for (std::size_t i = 2; i < mine.size(); ++i)
    if (mx[i] != mn[i])
      throw Error(std::string("omgs: ranks disagree on the option ") + agreed_option_names[i] +
                  " (this rank " + std::to_string(rank) + ")");
}

void RuntimeImpl::make_model() {
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
  agree_on_error(comm, err, "omgs");
  if (options.perf_model == "calibrate") calibrate();
  // The planner counts the bytes of the pair format in force (models of another family
  // than alpha-beta, e.g. the reference one, keep their published constants).
  if (const AlphaBetaModel* ab = model->as_alpha_beta(); ab != nullptr && ab->pair_bytes() == 8.0)
    model = std::make_unique<AlphaBetaModel>(ab->with_pair_bytes(wire_pair_bytes()));
  // ... and the dense groups' form: 2 bytes per element in a 16-bit one (a model that
  // states its own allreduce_element_bytes keeps it).
  if (const AlphaBetaModel* ab = model->as_alpha_beta();
      ab != nullptr && ab->allreduce_element_bytes() == 4.0 && dense_wire() != DenseWire::fp32)
    model = std::make_unique<AlphaBetaModel>(ab->with_allreduce_element_bytes(2.0));
}

/// RuntimeOptions::dense_wire resolved: automatic is the gradient type's.
DenseWire RuntimeImpl::dense_wire() const noexcept {
  if (options.dense_wire != DenseWire::automatic) return options.dense_wire;
  switch (options.gradient_type) {
    case GradientType::bf16:
      return DenseWire::bf16;
    case GradientType::fp16:
      return DenseWire::fp16;
    default:
      return DenseWire::fp32;
  }
}

/// The compact block's bytes per pair for one group of every layer (at a fixed density it
/// hardly depends on the group's size: the chunk counts are a few percent), 8 for pairs8.
double RuntimeImpl::wire_pair_bytes() const {
  if (options.pair_wire == PairWire::pairs8) return 8.0;
  std::uint64_t n = 0;
  for (const LayerSpec& l : layers) n += l.numel;
  n = std::min<std::uint64_t>(n, std::numeric_limits<std::uint32_t>::max());
  return make_pair_layout(n, selected_count(n, density_now), wire_values(options.pair_wire))
      .bytes_per_pair();
}

/// Collective: throws on every rank unless every rank computed the same groups.
void RuntimeImpl::check_plan(const Plan& plan) {
  std::uint64_t h = fnv_basis;
  for (const Group& g : plan.groups) {
    h = fnv1a(h, &g.begin, sizeof g.begin);
    h = fnv1a(h, &g.end, sizeof g.end);
    h = fnv1a(h, &g.collective, sizeof g.collective);
  }
  std::vector<std::uint64_t> mx, mn;
  max_min(comm, {h, plan.groups.size()}, mx, mn);
  if (mx[0] != mn[0])
    throw Error("omgs: ranks computed different plans (between " + std::to_string(mn[1]) + " and " +
                std::to_string(mx[1]) + " groups; this rank " + std::to_string(rank) + " has " +
                std::to_string(plan.groups.size()) +
                "): their backward times or performance models differ");
}

}  // namespace omgs::detail
