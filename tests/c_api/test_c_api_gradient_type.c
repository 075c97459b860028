/* 16-bit gradients through the C API, under mpiexec (1, 2 and 4 ranks): opt.gradient_type's
 * default, a bad name and ranks that disagree refused on every rank, omgs_gradient16 /
 * omgs_aggregated16 (and omgs_gradient NULL with a 16-bit type), the bf16 aggregate equal
 * to the fp32 one rounded to nearest even, the fp16 one within its rounding, and the mass
 * conserved in fp32 over several iterations. Exits non-zero on any rank's failure. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omgs/omgs.h>

#include "c_expect.h"

#define NUM_LAYERS 3
#define ITERATIONS 4

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
/* float -> bf16 bits, to nearest even (finite values of moderate size only). */
static uint16_t to_bf16(float v) {
  const uint32_t x = float_bits(v);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/* binary16 bits -> float, normal numbers and zero (what these values hold). */
static float from_fp16(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0 && m == 0) return bits_float(sign);
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}
/* A value of rank r: small multiples of 1/64, exact in bf16 and fp16. */
static float value(int r, int it, size_t l, size_t i) {
  return (float)((int)((i * 7 + (size_t)r * 13 + (size_t)it * 5 + l) % 61) - 30) / 64.0f;
}

static omgs_runtime* create(const omgs_options* opt, const omgs_layer* layers) {
  omgs_runtime* rt = NULL;
  if (omgs_create(MPI_COMM_WORLD, layers, NUM_LAYERS, opt, &rt) != OMGS_OK) {
    fprintf(stderr, "omgs_create: %s\n", omgs_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return rt;
}

/* ITERATIONS iterations with 16-bit gradients; checks the 16-bit aggregate and, in fp32,
 * fed == size * applied + residuals. */
static void run(omgs_runtime* rt, int rank, int size, int bf16) {
  double* fed[NUM_LAYERS];
  double* kept[NUM_LAYERS];
  size_t numel[NUM_LAYERS];
  for (size_t l = 0; l < NUM_LAYERS; ++l) {
    omgs_gradient16(rt, l, &numel[l]);
    fed[l] = calloc(numel[l], sizeof(double));
    kept[l] = calloc(numel[l], sizeof(double));
  }
  for (int it = 0; it < ITERATIONS; ++it) {
    for (size_t l = NUM_LAYERS; l-- > 0;) {
      uint16_t* g = omgs_gradient16(rt, l, NULL);
      for (size_t i = 0; i < numel[l]; ++i) g[i] = to_bf16(value(rank, it, l, i));
      if (!bf16) /* fp16 bits of k / 64, |k| <= 30: exponent and mantissa from the float's */
        for (size_t i = 0; i < numel[l]; ++i) {
          const uint32_t x = float_bits(value(rank, it, l, i));
          g[i] = (x & 0x7fffffffu) == 0
                     ? (uint16_t)((x >> 16) & 0x8000u)
                     : (uint16_t)(((x >> 16) & 0x8000u) | ((((x >> 23) & 0xffu) - 112u) << 10) |
                                  ((x >> 13) & 0x3ffu));
        }
      EXPECT(omgs_ready(rt, l) == OMGS_OK);
    }
    EXPECT(omgs_finish(rt, NULL) == OMGS_OK);
    for (size_t l = 0; l < NUM_LAYERS; ++l) {
      const float* agg = omgs_aggregated(rt, l, NULL);
      const uint16_t* a16 = omgs_aggregated16(rt, l, NULL);
      for (size_t i = 0; i < numel[l]; ++i) {
        if (bf16)
          EXPECT(a16[i] == to_bf16(agg[i]));
        else
          EXPECT(fabsf(from_fp16(a16[i]) - agg[i]) <= fabsf(agg[i]) / 2048.0f + 1e-7f);
        for (int r = 0; r < size; ++r) fed[l][i] += value(r, it, l, i);
        kept[l][i] -= (double)agg[i] * size; /* fed - applied */
      }
    }
  }
  for (size_t l = 0; l < NUM_LAYERS; ++l) {
    const float* resid = omgs_residual(rt, l, NULL);
    double* held = malloc(numel[l] * sizeof(double));
    for (size_t i = 0; i < numel[l]; ++i) held[i] = resid[i];
    MPI_Allreduce(MPI_IN_PLACE, held, (int)numel[l], MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < numel[l]; ++i) EXPECT(fabs(fed[l][i] + kept[l][i] - held[i]) < 1e-4);
    free(held);
    free(fed[l]);
    free(kept[l]);
  }
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT(omgs_kokkos_initialize(&argc, &argv) == OMGS_OK);
  omgs_layer layers[NUM_LAYERS] = {{"embed", 3000, 1e-4}, {"hidden", 800, 1e-4}, {"out", 10, 1e-5}};
  omgs_options opt;
  omgs_options_init(&opt);
  EXPECT(opt.gradient_type != NULL && strcmp(opt.gradient_type, "fp32") == 0);
  opt.perf_model = "reference";
  if (size == 1 || size > 16) opt.perf_model = "calibrate"; /* the reference knows 2 .. 16 */
  opt.density = 0.01;
  omgs_runtime* rt = NULL;
  opt.gradient_type = "half"; /* a bad name: every rank fails, naming it */
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, NUM_LAYERS, &opt, &rt) == OMGS_ERROR_SETUP);
  EXPECT(rt == NULL && strstr(omgs_last_error(NULL), "gradient_type 'half'") != NULL);
  opt.gradient_type = rank == 0 ? "fp8" : "bf16"; /* one rank's: every rank fails */
  EXPECT(omgs_create(MPI_COMM_WORLD, layers, NUM_LAYERS, &opt, &rt) == OMGS_ERROR_SETUP);
  EXPECT(rt == NULL && (rank > 0 || strstr(omgs_last_error(NULL), "'fp8'") != NULL));
  if (size > 1) { /* a differing type fails every rank, naming the option */
    opt.gradient_type = rank == size - 1 ? "fp16" : "bf16";
    EXPECT(omgs_create(MPI_COMM_WORLD, layers, NUM_LAYERS, &opt, &rt) == OMGS_ERROR_SETUP);
    EXPECT(rt == NULL && strstr(omgs_last_error(NULL), "gradient_type") != NULL);
  }
  opt.gradient_type = NULL; /* the default: fp32 */
  rt = create(&opt, layers);
  EXPECT(omgs_gradient(rt, 0, NULL) != NULL);
  EXPECT(omgs_gradient16(rt, 0, NULL) == NULL && strstr(omgs_last_error(rt), "fp32") != NULL);
  EXPECT(omgs_aggregated16(rt, 0, NULL) == NULL);
  omgs_destroy(rt);
  const int on_host = omgs_buffers_on_host();
  for (int bf16 = 1; bf16 >= 0; --bf16) {
    opt.gradient_type = bf16 ? "bf16" : "fp16";
    rt = create(&opt, layers);
    size_t n = 0;
    EXPECT(omgs_gradient(rt, 1, &n) == NULL && n == 0);
    EXPECT(strstr(omgs_last_error(rt), opt.gradient_type) != NULL);
    EXPECT(omgs_gradient16(rt, 1, &n) != NULL && n == 800);
    EXPECT(omgs_aggregated16(rt, 1, &n) != NULL && n == 800);
    EXPECT(omgs_gradient16(rt, NUM_LAYERS, &n) == NULL && n == 0);
    EXPECT(omgs_gradient16(NULL, 0, NULL) == NULL);
    if (on_host) run(rt, rank, size, bf16); /* a device build: this program reads with the CPU */
    omgs_destroy(rt);
  }
  omgs_kokkos_finalize();
  int total = failures;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total == 0 && rank == 0) printf("C API gradient type test passed\n");
  return total ? 1 : 0;
}
