/* A downstream C program, built against an installed omgs: one iteration of two layers at
 * density 1 on every rank, then each rank checks that it got the average of all ranks'
 * gradients. Exits non-zero if any rank did not. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

#include <omgs/omgs.h>

static int fail(const char* what, const char* why) {
  fprintf(stderr, "omgs C consumer: %s: %s\n", what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

/* Writes (rank + 1) into every gradient, finishes the iteration and counts wrong averages. */
static int one_iteration(omgs_runtime* rt, int rank, int size) {
  size_t n = 0;
  int wrong = 0;
  if (omgs_begin_backward(rt) != OMGS_OK) return fail("omgs_begin_backward", omgs_last_error(rt));
  for (size_t l = omgs_num_layers(rt); l-- > 0;) {
    float* g = omgs_gradient(rt, l, &n);
    for (size_t i = 0; i < n; ++i) g[i] = (float)(rank + 1);
    if (omgs_ready(rt, l) != OMGS_OK) return fail("omgs_ready", omgs_last_error(rt));
  }
  if (omgs_finish(rt, NULL) != OMGS_OK) return fail("omgs_finish", omgs_last_error(rt));
  const double mean = (size + 1) / 2.0;
  for (size_t l = 0; l < omgs_num_layers(rt); ++l) {
    const float* a = omgs_aggregated(rt, l, &n);
    for (size_t i = 0; i < n; ++i) wrong += fabs(a[i] - mean) > 1e-5 * mean;
  }
  return wrong;
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1, wrong = 0, any = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (omgs_kokkos_initialize(&argc, &argv) != OMGS_OK) fail("Kokkos", omgs_last_error(NULL));
  const omgs_layer layers[2] = {{"hidden", 256, 1e-4}, {"out", 16, 1e-5}};
  omgs_options opt;
  omgs_options_init(&opt);
  opt.density = 1.0;
  opt.perf_model = "reference";
  omgs_runtime* rt = NULL;
  if (omgs_create(MPI_COMM_WORLD, layers, 2, &opt, &rt) != OMGS_OK) {
    fail("omgs_create", omgs_last_error(NULL));
  }
  /* A device build's buffers cannot be written by the CPU: only the set-up is checked. */
  if (omgs_buffers_on_host()) wrong = one_iteration(rt, rank, size);
  printf("omgs C consumer: rank %d of %d averaged %zu layers in %zu groups, %d wrong\n", rank, size,
         omgs_num_layers(rt), omgs_num_groups(rt), wrong);
  omgs_destroy(rt);
  omgs_kokkos_finalize();
  MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
