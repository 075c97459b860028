/* omgs C API: the runtime for C (and, through MPI_Comm_f2c, Fortran or any language with a
 * C foreign-function interface). No exception crosses it: every call reports failure by
 * its return value, and omgs_last_error() says why.
 *
 *   omgs_options opt;
 *   omgs_options_init(&opt);
 *   opt.density = 0.001;
 *   omgs_runtime* rt = NULL;
 *   if (omgs_create(MPI_COMM_WORLD, layers, n_layers, &opt, &rt) != OMGS_OK) {
 *     fprintf(stderr, "%s\n", omgs_last_error(NULL));   // same message on every rank
 *   }
 *   for (iteration) {
 *     for (size_t l = n_layers; l-- > 0;) {              // backward pass
 *       float* g = omgs_gradient(rt, l, NULL);           // write layer l's gradient here
 *       omgs_ready(rt, l);
 *     }
 *     if (omgs_finish(rt, &stats) != OMGS_OK) fprintf(stderr, "%s\n", omgs_last_error(rt));
 *     const float* avg = omgs_aggregated(rt, l, NULL);   // averaged sparse gradient
 *   }
 *   omgs_destroy(rt);
 *
 * Pointers returned by omgs_gradient / omgs_aggregated / omgs_residual point into the
 * runtime's buffers in Kokkos' default memory space: device memory in a CUDA or HIP build.
 * A residual pointer is valid until the next omgs_ready of its layer's group (the residual
 * alternates between two buffers); ask for it again after each iteration.
 */
#ifndef OMGS_OMGS_H
#define OMGS_OMGS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <omgs/export.hpp>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. 0..8 mirror omgs::Status (per-iteration outcomes); the others are C API
 * errors. */
enum {
  OMGS_OK = 0,
  OMGS_UNKNOWN_LAYER = 1,
  OMGS_ALREADY_READY = 2,
  OMGS_NOT_ALL_READY = 3,
  OMGS_SHAPE_MISMATCH = 4,
  OMGS_NONFINITE_GRADIENT = 5,
  OMGS_COMM_FAILED = 6,
  OMGS_PLAN_FAILED = 7,
  OMGS_CONCURRENT_CALL = 8,
  OMGS_ERROR_INVALID_ARGUMENT = 100, /* a NULL pointer or bad value given to the C API */
  OMGS_ERROR_SETUP = 101,            /* omgs::Error: omgs_create failed, or a file could not be
                                        written; see omgs_last_error */
  OMGS_ERROR_INTERNAL = 102          /* an unexpected exception (e.g. out of memory) */
};

typedef struct omgs_layer {
  const char* name;  /* unique, non-empty */
  uint64_t numel;    /* > 0 */
  double backward_s; /* >= 0; all 0: measured during the first iterations */
} omgs_layer;

typedef struct omgs_options {
  double density;         /* default 0.001 */
  const char* planner;    /* "mixed" (default), "mgs", "layerwise", "single", "threshold",
                             "optimal", "mgs_mixed", "dense", "automatic" */
  const char* perf_model; /* "calibrate" (default), "reference", or an alpha-beta JSON file */
  uint64_t threshold_numel;
  int force_inline_progress; /* nonzero: no progress thread */
  double wait_timeout_s;     /* the watchdog's bound (default 300) */
  int abort_on_timeout;      /* nonzero: MPI_Abort with the watchdog's report */
  int profile_iterations;    /* default 5 */
  const char* trace_path;    /* Chrome trace JSON, "%r" -> rank; NULL or "": none */
  double shutdown_timeout_s; /* bound of the shutdown drain, e.g. after a fault (default 5) */
  /* The closed loop (docs/planner.md, "Closed loop"): every refit_iterations iterations
   * the model is refitted to the run's measured costs, agreed by every rank, and the plan
   * switches when predicted to gain at least replan_min_gain (a fraction of the current
   * plan's predicted time), at most max_replans times. OMGS_REFIT_ITERATIONS,
   * OMGS_MAX_REPLANS and OMGS_REPLAN_MIN_GAIN win. */
  int refit_iterations;   /* >= 0; default 5; 0: off */
  int max_replans;        /* >= 0; default 2 */
  double replan_min_gain; /* finite, >= 0; default 0.05 */
  /* How the sparse groups are exchanged: "allgather" (default), "allreduce" (the sparse
   * allreduce: the global top-k of the summed pairs) or "automatic" (as the plan says per
   * group). OMGS_SPARSE_EXCHANGE wins. */
  const char* sparse_exchange;
  /* Accuracy at low density (docs/api.md, "Accuracy at low density"), after Deep Gradient
   * Compression. Warm-up: over the first warmup_iterations iterations the density falls
   * exponentially from warmup_density to density in warmup_stages stages. momentum: the
   * runtime's momentum correction with momentum factor masking (the application then runs
   * plain SGD, without momentum of its own). clip_norm: each layer's gradient on each rank
   * is clipped to an L2 norm of clip_norm / sqrt(P). No environment variables. */
  double warmup_density;      /* in [density, 1]; default 0.25 */
  uint64_t warmup_iterations; /* default 0: no warm-up */
  int warmup_stages;          /* >= 1; default 4 */
  double momentum;            /* in [0, 1); default 0: off */
  double clip_norm;           /* >= 0; default 0: off */
  /* The sparse groups' wire format (allgather and sparse allreduce): "bf16" (default; NULL
   * keeps it), "pairs8", "fp32", "fp16" (the compact pair format, docs/api.md "Pair wire").
   * OMGS_PAIR_WIRE wins. */
  const char* pair_wire;
  /* How the dense groups are allreduced: "automatic" (default: a short measurement at
   * creation picks the faster of MPI_Iallreduce and a blocking MPI_Allreduce by the
   * progress thread), "nonblocking" or "blocking". OMGS_DENSE_ALLREDUCE wins. */
  const char* dense_allreduce;
  /* The gradients' element type: "fp32" (default; NULL keeps it), "bf16" or "fp16"
   * (docs/api.md, "16-bit gradients"): write the gradient through omgs_gradient16, read the
   * aggregated one through omgs_aggregated16 (rounded to the type; omgs_aggregated keeps the
   * fp32 one). The residual and accumulation stay fp32. Every rank must agree. */
  const char* gradient_type;
  /* The collectives the plans may give a group, by name, comma-separated (e.g.
   * "sparse,sparse_allreduce,dense"; docs/planner.md, "The table of collectives"); NULL or
   * "": the set sparse_exchange names. OMGS_COLLECTIVES wins. Every rank must agree. */
  const char* collectives;
  /* Bytes per rank one group's exchange may allocate; 0 (default): no limit. The choosing
   * planners give no group a collective that needs more. OMGS_MEMORY_BUDGET wins. */
  uint64_t memory_budget_bytes;
  /* The dense groups' values on the wire: "automatic" (default; NULL keeps it: the gradient
   * type's), "fp32", "bf16" or "fp16" (a 16-bit form keeps its rounding error in the
   * residual; docs/api.md, "Dense groups in 16 bits"). OMGS_DENSE_WIRE wins. Every rank must
   * agree. */
  const char* dense_wire;
  /* Ranks per node of the two-level collectives (docs/comm.md, "Two levels"): 0 (default)
   * finds the node by shared memory; G > 0: node = rank / G (emulated nodes). Must divide
   * the ranks. OMGS_RANKS_PER_NODE wins. Every rank must agree. */
  int ranks_per_node;
} omgs_options;

typedef struct omgs_iteration_stats {
  int status;       /* an OMGS_* code */
  int failed_group; /* -1 if none */
  uint64_t nonfinite;
  double sparsify_s, finish_wait_s, aggregate_s, iteration_s;
  uint64_t bytes_sent, bytes_received, iteration;
  int profiling, replanned;
  /* The plan's predicted iteration time (model in force) and this rank's measured one
   * (its timeline's end, seconds from the start of backward). */
  double predicted_s, measured_s;
  uint32_t model_generation; /* +1 at each refit of the performance model */
  uint32_t plan_generation;  /* +1 at each change of plan (profiling, closed loop) */
  int refitted;              /* the model was refitted after this iteration */
  /* The calling thread's CPU time in the sparsify steps (IterationStats::sparsify_cpu_s). */
  double sparsify_cpu_s;
  /* The sparse groups' pairs sent and their bytes per pair on the wire (8 for pairs8):
   * IterationStats::pairs_sent. */
  uint64_t pairs_sent;
  double bytes_per_pair;
} omgs_iteration_stats;

/* The closed loop's last refit (all zero, model "", before the first). Identical on every
 * rank but measured_s and owner_wait_s. The pointers point into the runtime and stay valid
 * until the next omgs_finish or omgs_destroy of it. */
typedef struct omgs_refit_report {
  uint64_t iteration;           /* the iteration after which it ran */
  size_t iterations_fitted;     /* measured iterations it used */
  double measured_s;            /* median measured iteration end on this rank */
  double owner_wait_s;          /* median of finish()'s wait on this rank */
  double predicted_current_s;   /* the plan in force, under the fitted model */
  double predicted_candidate_s; /* the loop's candidate plan, under the fitted model */
  size_t candidate_groups;
  int switched;      /* the candidate replaced the plan */
  int settled;       /* no further refits */
  const char* model; /* the fitted model, one line */
  /* The agreed points it fitted, per group of the plan it measured (num_groups entries):
   * elements, sparsify (slowest rank's median) and allgather (fastest rank's median). */
  size_t num_groups;
  const uint64_t* group_numel;
  const double* group_sparsify_s;
  const double* group_allgather_s;
  int explored;   /* switched although predicted within replan_min_gain (tried once) */
  int taken_back; /* the previous switch measured slower: the plan it replaced is back */
  double measured_iteration_s; /* agreed: slowest rank's median iteration time in the window */
  /* Whose plan the candidate is ("mgs", "single", ...): the configured planner's, or another
   * planner's predicted at least replan_min_gain faster (docs/planner.md). A static string;
   * "" before the first refit. */
  const char* candidate_planner;
} omgs_refit_report;

typedef struct omgs_runtime omgs_runtime;

/* Fills the defaults. */
OMGS_EXPORT void omgs_options_init(omgs_options* options);

/* Initializes Kokkos for C programs (no-op returning OMGS_OK if it is already initialized)
 * and finalizes it, if omgs initialized it. MPI is the application's to initialize. */
OMGS_EXPORT int omgs_kokkos_initialize(int* argc, char*** argv);
OMGS_EXPORT void omgs_kokkos_finalize(void);

/* Collective over comm. On failure *out is NULL, every rank gets a non-OK code and
 * omgs_last_error(NULL) names the layer, option or rank at fault. options may be NULL. */
OMGS_EXPORT int omgs_create(MPI_Comm comm, const omgs_layer* layers, size_t num_layers,
                            const omgs_options* options, omgs_runtime** out);
/* Not collective; NULL is allowed. Call before MPI_Finalize / omgs_kokkos_finalize. */
OMGS_EXPORT void omgs_destroy(omgs_runtime* rt);

OMGS_EXPORT size_t omgs_num_layers(const omgs_runtime* rt);
OMGS_EXPORT size_t omgs_num_groups(const omgs_runtime* rt);
/* The group (plan order) of layer l, or (size_t)-1 for an unknown layer. */
OMGS_EXPORT size_t omgs_group_of_layer(const omgs_runtime* rt, size_t layer);

/* Layer l's slot of the gradient buffer (write it, then omgs_ready); *numel receives its
 * length when numel is not NULL. NULL for an unknown layer. */
OMGS_EXPORT float* omgs_gradient(omgs_runtime* rt, size_t layer, size_t* numel);
/* options.gradient_type "bf16" / "fp16": the same slots as 16-bit values (the IEEE bfloat16
 * or binary16 bits, 2 bytes per element), and the aggregated gradient rounded to the type.
 * NULL for an unknown layer, or when the type is another (omgs_last_error(rt) says which):
 * omgs_gradient is NULL with a 16-bit type, omgs_gradient16 with fp32. */
OMGS_EXPORT uint16_t* omgs_gradient16(omgs_runtime* rt, size_t layer, size_t* numel);
OMGS_EXPORT const uint16_t* omgs_aggregated16(const omgs_runtime* rt, size_t layer, size_t* numel);
OMGS_EXPORT int omgs_begin_backward(omgs_runtime* rt);
OMGS_EXPORT int omgs_ready(omgs_runtime* rt, size_t layer);
/* stats may be NULL. */
OMGS_EXPORT int omgs_finish(omgs_runtime* rt, omgs_iteration_stats* stats);
OMGS_EXPORT const float* omgs_aggregated(const omgs_runtime* rt, size_t layer, size_t* numel);
OMGS_EXPORT const float* omgs_residual(const omgs_runtime* rt, size_t layer, size_t* numel);

/* Layer l's velocity of momentum correction (after the last iteration's masking); NULL for
 * an unknown layer or when options.momentum is 0 (omgs_last_error(rt) says which). */
OMGS_EXPORT const float* omgs_momentum(const omgs_runtime* rt, size_t layer, size_t* numel);
/* Collective, between iterations: from the next iteration on every group sends this
 * fraction of its entries (the planner runs again; residuals and velocities carry over; it
 * ends the warm-up). Every rank must pass the same value: otherwise, for a bad density or a
 * call within an iteration, every rank gets OMGS_ERROR_SETUP and the density stays. */
OMGS_EXPORT int omgs_set_density(omgs_runtime* rt, double density);
/* The density in force (the warm-up's or omgs_set_density's); 0 for NULL. */
OMGS_EXPORT double omgs_density(const omgs_runtime* rt);

/* 1 if the pointers above are host memory (Serial / OpenMP builds), 0 if device memory
 * (CUDA / HIP builds: copy with the device runtime or use them in kernels). */
OMGS_EXPORT int omgs_buffers_on_host(void);

/* The closed loop's last refit into *report (see omgs_refit_report). */
OMGS_EXPORT int omgs_last_refit(const omgs_runtime* rt, omgs_refit_report* report);
/* Writes the model in force (after a refit: the fitted one) as alpha-beta JSON, the format
 * options.perf_model reads, so that a later run starts from it. OMGS_ERROR_SETUP for the
 * reference model (nothing to save) or a file that cannot be written. Not collective. */
OMGS_EXPORT int omgs_save_perf_model(const omgs_runtime* rt, const char* path);

/* The model in force's line of one collective by name ("allgather", "allreduce": the dense
 * allreduce, "sparse_allreduce") at this run's number of ranks P: *alpha_s and
 * *beta_s_per_byte of its table entry for P (calibration and the closed loop's refit give
 * one for each collective they time or fit; docs/planner.md says which bytes beta
 * multiplies). OMGS_ERROR_SETUP (omgs_last_error(rt) says why) for a model of another
 * family (the reference model), a collective the model has no line for, or a line without
 * an entry for P (a formula of P: omgs_model_collective_s predicts with it). The same on
 * every rank. Not collective. */
OMGS_EXPORT int omgs_model_line(const omgs_runtime* rt, const char* collective, double* alpha_s,
                                double* beta_s_per_byte);
/* The model in force's predicted seconds of one collective by name (as omgs_model_line
 * names them) for a group of numel elements among this run's ranks at the density in force
 * (the dense allreduce ignores it), whatever the model's family. OMGS_ERROR_SETUP where the
 * model does not know that collective at this P. Not collective. */
OMGS_EXPORT int omgs_model_collective_s(const omgs_runtime* rt, const char* collective,
                                        uint64_t numel, double* seconds);

/* Writes the Chrome trace (path NULL: options.trace_path) or the SVG Gantt chart. */
OMGS_EXPORT int omgs_write_trace(const omgs_runtime* rt, const char* path);
OMGS_EXPORT int omgs_write_svg(const omgs_runtime* rt, const char* path);

/* The message of rt's last non-OK call; with rt NULL, of the last failed omgs_create (or
 * C API argument error) on this thread. Never NULL; "" if there was none. Valid until the
 * next omgs call on the same runtime / thread. */
OMGS_EXPORT const char* omgs_last_error(const omgs_runtime* rt);
/* A short name of a return code ("ok", "non-finite gradient", ...). */
OMGS_EXPORT const char* omgs_status_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* OMGS_OMGS_H */
