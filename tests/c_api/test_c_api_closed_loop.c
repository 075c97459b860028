/* The closed loop through the C API, under mpiexec (2 or 4 ranks: the reference model's
 * cluster sizes): its options (defaults, bad values failing every rank), the stats'
 * predicted and measured times and generations, omgs_last_refit, omgs_save_perf_model and
 * a later run started from the saved model. Every rank measures its own costs (rank r's
 * backward is slower); the refit and the plan must still agree on every rank. Exits
 * non-zero on any rank's failure. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <omgs/omgs.h>

#include "c_expect.h"

enum { kLayers = 6 };
static omgs_layer layers[kLayers] = {{"embed", 40000, 1e-3},    {"conv1", 15000, 5e-4},
                                     {"bn1", 32, 1e-5},         {"conv2", 60000, 1e-3},
                                     {"fc.weight", 9000, 3e-4}, {"fc.bias", 10, 1e-5}};
static int rank = 0, size = 1;

static void spin_for(double seconds) {
  const double end = MPI_Wtime() + seconds;
  while (MPI_Wtime() < end) {
  }
}

/* 1 if x is the same on every rank. */
static int same_everywhere_u64(uint64_t x) {
  unsigned long long v = x, lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

static uint64_t hash_bytes(const void* p, size_t n, uint64_t h) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a */
  return h;
}

static uint64_t plan_hash(const omgs_runtime* rt) {
  uint64_t h = 14695981039346656037ull;
  for (size_t l = 0; l < kLayers; ++l) {
    const size_t g = omgs_group_of_layer(rt, l);
    h = hash_bytes(&g, sizeof g, h);
  }
  return h;
}

static uint64_t file_hash(const char* path, size_t* bytes) {
  char buf[4096];
  uint64_t h = 14695981039346656037ull;
  size_t n = 0;
  *bytes = 0;
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    h = hash_bytes(buf, n, h);
    *bytes += n;
  }
  fclose(f);
  return h;
}

/* One iteration (rank r spends (r + 1) ms per layer in "backward"). */
static int run_iteration(omgs_runtime* rt, int it, omgs_iteration_stats* st) {
  size_t n = 0;
  EXPECT(omgs_begin_backward(rt) == OMGS_OK);
  for (size_t l = kLayers; l-- > 0;) {
    spin_for(1e-3 * (1 + rank));
    float* g = omgs_gradient(rt, l, &n);
    for (size_t i = 0; i < n; ++i) g[i] = (float)((i * 7919 + l * 31 + (size_t)it) % 1000) - 500.f;
    EXPECT(omgs_ready(rt, l) == OMGS_OK);
  }
  return omgs_finish(rt, st);
}

/* Bad closed-loop options fail omgs_create on every rank, naming the option. */
static void check_bad_options(void) {
  omgs_options opt;
  omgs_runtime* rt = NULL;
  omgs_options_init(&opt);
  EXPECT(opt.refit_iterations == 5 && opt.max_replans == 2 && opt.replan_min_gain == 0.05);
  opt.perf_model = "reference";
  opt.refit_iterations = rank == 0 ? -1 : 3;
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_ERROR_SETUP && !rt);
  EXPECT(strstr(omgs_last_error(NULL), rank == 0 ? "refit_iterations" : "rank 0") != NULL);
  opt.refit_iterations = 3;
  opt.max_replans = rank == size - 1 ? -2 : 2;
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_ERROR_SETUP && !rt);
  EXPECT(rank != size - 1 || strstr(omgs_last_error(NULL), "max_replans") != NULL);
  opt.max_replans = 2;
  opt.replan_min_gain = rank == 0 ? NAN : 0.05;
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_ERROR_SETUP && !rt);
  EXPECT(rank != 0 || strstr(omgs_last_error(NULL), "replan_min_gain") != NULL);
  opt.replan_min_gain = rank == 0 ? 0.05 : 0.1; /* valid, but not the same everywhere */
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_ERROR_SETUP && !rt);
  EXPECT(strstr(omgs_last_error(NULL), "replan_min_gain") != NULL);
}

/* Loop off (the default): no refit, generation 0, and the reference model cannot be saved. */
static void check_loop_off(void) {
  omgs_options opt;
  omgs_runtime* rt = NULL;
  omgs_refit_report rep;
  omgs_iteration_stats st;
  omgs_options_init(&opt);
  opt.perf_model = "reference";
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_OK);
  if (rt == NULL) return;
  EXPECT(run_iteration(rt, 0, &st) == OMGS_OK);
  EXPECT(st.refitted == 0 && st.model_generation == 0 && st.plan_generation == 0);
  EXPECT(st.predicted_s > 0 && st.measured_s > 0);
  EXPECT(omgs_last_refit(rt, &rep) == OMGS_OK);
  EXPECT(rep.iterations_fitted == 0 && rep.num_groups == 0 && strcmp(rep.model, "") == 0);
  EXPECT(strcmp(rep.candidate_planner, "") == 0);
  EXPECT(omgs_save_perf_model(rt, "never.json") == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "alpha-beta") != NULL);
  /* Argument errors, each with its message. */
  EXPECT(omgs_last_refit(NULL, &rep) == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(omgs_last_error(NULL), "omgs_last_refit: rt is NULL") != NULL);
  EXPECT(omgs_last_refit(rt, NULL) == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(omgs_last_error(rt), "omgs_last_refit: report is NULL") != NULL);
  EXPECT(omgs_save_perf_model(NULL, "x.json") == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(omgs_last_error(NULL), "omgs_save_perf_model: rt is NULL") != NULL);
  EXPECT(omgs_save_perf_model(rt, NULL) == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(omgs_last_error(rt), "path is NULL") != NULL);
  EXPECT(omgs_save_perf_model(rt, "") == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(omgs_last_error(rt), "path is empty") != NULL);
  /* The reference model: costs by name, no lines; the allgather only. */
  double alpha = -1, beta = -1, s = -1;
  EXPECT(omgs_model_line(rt, "allgather", &alpha, &beta) == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "not an alpha-beta model") != NULL && alpha == -1);
  EXPECT(omgs_model_collective_s(rt, "allgather", 10000, &s) == OMGS_OK && s > 0);
  EXPECT(omgs_model_collective_s(rt, "allreduce", 10000, &s) == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "no dense allreduce cost") != NULL);
  EXPECT(omgs_model_collective_s(rt, "ring", 10000, &s) == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "no collective named \"ring\"") != NULL);
  EXPECT(omgs_model_line(NULL, "allgather", &alpha, &beta) == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(omgs_model_line(rt, NULL, &alpha, &beta) == OMGS_ERROR_INVALID_ARGUMENT);
  EXPECT(omgs_model_collective_s(rt, "allgather", 1, NULL) == OMGS_ERROR_INVALID_ARGUMENT);
  omgs_destroy(rt);
}

/* The report of a settled loop: identical on every rank, points of the measured plan. */
static void check_report(const omgs_refit_report* rep) {
  uint64_t numel = 0, h = hash_bytes(rep->model, strlen(rep->model), 0);
  EXPECT(rep->iterations_fitted == 3 && rep->settled == 1);
  EXPECT(strstr(rep->model, "alpha") != NULL);
  EXPECT(rep->num_groups >= 1 && rep->num_groups <= kLayers && rep->candidate_groups >= 1);
  /* One of the loop's candidate planners (configured mgs, or an automatic candidate). */
  EXPECT(strlen(rep->candidate_planner) > 0 && strcmp(rep->candidate_planner, "automatic") != 0);
  h = hash_bytes(rep->candidate_planner, strlen(rep->candidate_planner), h);
  for (size_t g = 0; g < rep->num_groups; ++g) {
    numel += rep->group_numel[g];
    EXPECT(rep->group_sparsify_s[g] >= 0 && isfinite(rep->group_sparsify_s[g]));
    EXPECT(rep->group_allgather_s[g] >= 0 && isfinite(rep->group_allgather_s[g]));
    h = hash_bytes(&rep->group_sparsify_s[g], sizeof(double), h);
    h = hash_bytes(&rep->group_allgather_s[g], sizeof(double), h);
  }
  EXPECT(numel == 40000 + 15000 + 32 + 60000 + 9000 + 10);
  EXPECT(rep->predicted_current_s > 0 && rep->predicted_candidate_s > 0);
  EXPECT(rep->measured_s > 0);
  EXPECT(rep->measured_iteration_s > 0);
  h = hash_bytes(&rep->measured_iteration_s, sizeof(double), h); /* agreed too */
  h = hash_bytes(&rep->predicted_current_s, sizeof(double), h);
  h = hash_bytes(&rep->predicted_candidate_s, sizeof(double), h);
  EXPECT(same_everywhere_u64(h)); /* agreed: bit-identical on every rank */
}

/* The refitted model's lines by name: the allgather's, fitted (the reference model had no
 * other); its prediction is its line's alpha + beta * P k 8 bytes, the same on every rank. */
static void check_lines(const omgs_runtime* rt) {
  double alpha = -1, beta = -1, s = -1;
  const double density = omgs_density(rt);
  const uint64_t numel = 10000, k = (uint64_t)ceil(density * (double)numel);
  EXPECT(omgs_model_line(rt, "allgather", &alpha, &beta) == OMGS_OK);
  EXPECT(alpha >= 0 && beta >= 0 && isfinite(alpha) && isfinite(beta));
  EXPECT(omgs_model_collective_s(rt, "allgather", numel, &s) == OMGS_OK);
  const double expected = alpha + beta * ((double)size * (double)k * 8.0);
  EXPECT(fabs(s - expected) <= 1e-12 * expected);
  EXPECT(omgs_model_line(rt, "allreduce", &alpha, &beta) == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "no line for \"allreduce\"") != NULL);
  EXPECT(same_everywhere_u64(hash_bytes(&s, sizeof s, 0)));
}

/* Loop on: refits at the end of each window, bounded replans, the fitted model saved and
 * read back by a later run. */
static void check_loop_on(void) {
  omgs_options opt;
  omgs_runtime* rt = NULL;
  omgs_iteration_stats st;
  omgs_refit_report rep;
  uint32_t last_model = 0;
  int refits = 0, replans = 0;
  omgs_options_init(&opt);
  opt.density = 0.01;
  opt.pair_wire = "pairs8"; /* check_lines tests the line's exact 8-byte pairs */
  opt.perf_model = "reference"; /* far from this machine: the refit has something to correct */
  opt.refit_iterations = 3;
  opt.max_replans = 2;
  opt.replan_min_gain = 0.0;
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &opt, &rt) == OMGS_OK);
  if (rt == NULL) return;
  for (int it = 0; it < 12; ++it) {
    EXPECT(run_iteration(rt, it, &st) == OMGS_OK);
    EXPECT(st.predicted_s > 0 && st.measured_s > 0);
    EXPECT(st.model_generation >= last_model);
    last_model = st.model_generation;
    refits += st.refitted;
    replans += st.replanned; /* backward times are given: no profiling replan */
    EXPECT(!st.refitted || (it + 1) % 3 == 0);
    EXPECT(same_everywhere_u64(plan_hash(rt)));
  }
  /* At most max_replans switches, each verified by the next window; one take-back. */
  EXPECT(refits >= 1 && refits <= opt.max_replans + 1 && replans <= opt.max_replans + 1);
  EXPECT(st.model_generation == (uint32_t)refits && st.plan_generation == (uint32_t)replans);
  EXPECT(omgs_last_refit(rt, &rep) == OMGS_OK);
  check_report(&rep);
  EXPECT(!rep.switched); /* a switch is verified by one more window: settled after a keep */
  check_lines(rt);

  /* Saved by every rank: the same bytes everywhere; a later run reads rank 0's file. */
  char mine[64];
  size_t bytes = 0, bytes2 = 0;
  snprintf(mine, sizeof mine, "c_api_closed_loop_model.%d.json", rank);
  EXPECT(omgs_save_perf_model(rt, mine) == OMGS_OK);
  const uint64_t h = file_hash(mine, &bytes);
  EXPECT(bytes > 0 && same_everywhere_u64(h));
  EXPECT(omgs_save_perf_model(rt, "/nonexistent-dir/m.json") == OMGS_ERROR_SETUP);
  EXPECT(strstr(omgs_last_error(rt), "cannot write") != NULL);
  const char* shared = "c_api_closed_loop_model.json";
  if (rank == 0) EXPECT(omgs_save_perf_model(rt, shared) == OMGS_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  omgs_options later;
  omgs_runtime* rt2 = NULL;
  omgs_options_init(&later);
  later.density = opt.density;
  later.pair_wire = opt.pair_wire;
  later.perf_model = shared;
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, kLayers, &later, &rt2) == OMGS_OK);
  if (rt2 != NULL) {
    EXPECT(omgs_save_perf_model(rt2, mine) == OMGS_OK); /* the model it runs with */
    EXPECT(file_hash(mine, &bytes2) == h && bytes2 == bytes);
    double a1 = -1, b1 = -1, a2 = -2, b2 = -2;
    EXPECT(omgs_model_line(rt, "allgather", &a1, &b1) == OMGS_OK);
    EXPECT(omgs_model_line(rt2, "allgather", &a2, &b2) == OMGS_OK);
    EXPECT(a1 == a2 && b1 == b2); /* the saved line, read back bit for bit */
    omgs_destroy(rt2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  remove(mine);
  if (rank == 0) remove(shared);
  omgs_destroy(rt);
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 && size != 4) {
    if (rank == 0) fprintf(stderr, "run with 2 or 4 ranks (the reference model's sizes)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  EXPECT(omgs_kokkos_initialize(&argc, &argv) == OMGS_OK);
  if (!omgs_buffers_on_host()) { /* a device build: this program writes with the CPU */
    omgs_kokkos_finalize();
    MPI_Finalize();
    if (rank == 0) printf("C API closed loop test passed (device buffers: skipped)\n");
    return 0;
  }
  check_bad_options();
  check_loop_off();
  check_loop_on();
  omgs_kokkos_finalize();
  int any = 0;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0)
    printf(any ? "C API closed loop test FAILED\n" : "C API closed loop test passed\n");
  return any ? 1 : 0;
}
