/* omgs-device-probe BACKEND -- COMMAND [ARGS...]
 *
 * Tests of a device build (Kokkos with CUDA or HIP) can only run where a device is. This
 * runs COMMAND (exec, same process) when one is usable, and otherwise prints
 * "SKIPPED: <reason>" and exits 77, CTest's SKIP_RETURN_CODE for such tests:
 *   cuda  libcuda.so.1 (the driver, not the toolkit's stub) loads, cuInit succeeds and
 *         cuDeviceGetCount > 0
 *   hip   libamdhip64.so loads and hipGetDeviceCount > 0
 * A driver that is there but fails otherwise (e.g. too old for the toolkit) is an error
 * (exit 2), not a skip: that machine is meant to run the tests. Usage errors exit 2.
 * The probe itself needs no CUDA or HIP headers: the driver is opened with dlopen.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { SKIP = 77, BROKEN = 2 };

typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int*);

static void* symbol(void* lib, const char* name) {
  void* s = dlsym(lib, name);
  if (!s) {
    fprintf(stderr, "omgs-device-probe: the driver has no %s: %s\n", name, dlerror());
  }
  return s;
}

/* 0: a device is usable; SKIP or BROKEN otherwise, with the reason printed. */
static int probe_cuda(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("SKIPPED: no CUDA driver on this machine (libcuda.so.1: %s)\n", dlerror());
    return SKIP;
  }
  init_fn cu_init = (init_fn)symbol(lib, "cuInit");
  count_fn cu_count = (count_fn)symbol(lib, "cuDeviceGetCount");
  if (!cu_init || !cu_count) {
    return BROKEN;
  }
  int rc = cu_init(0);
  if (rc == 100) { /* CUDA_ERROR_NO_DEVICE */
    printf("SKIPPED: the CUDA driver sees no device (cuInit: CUDA_ERROR_NO_DEVICE)\n");
    return SKIP;
  }
  if (rc == 34) { /* CUDA_ERROR_STUB_LIBRARY: the toolkit's link stub, not a driver */
    printf("SKIPPED: no CUDA driver on this machine (libcuda.so.1 is the toolkit's stub)\n");
    return SKIP;
  }
  int n = 0;
  if (rc != 0 || (rc = cu_count(&n)) != 0) {
    fprintf(stderr, "omgs-device-probe: the CUDA driver fails: error %d (cuda.h's CUresult)\n", rc);
    return BROKEN;
  }
  if (n == 0) {
    printf("SKIPPED: the CUDA driver sees no device (cuDeviceGetCount: 0)\n");
    return SKIP;
  }
  return 0;
}

static int probe_hip(void) {
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("SKIPPED: no HIP runtime on this machine (libamdhip64.so: %s)\n", dlerror());
    return SKIP;
  }
  count_fn hip_count = (count_fn)symbol(lib, "hipGetDeviceCount");
  if (!hip_count) {
    return BROKEN;
  }
  int n = 0;
  int rc = hip_count(&n);
  if (rc == 100 || (rc == 0 && n == 0)) { /* hipErrorNoDevice */
    printf("SKIPPED: the HIP runtime sees no device (hipGetDeviceCount: %d, %d devices)\n", rc, n);
    return SKIP;
  }
  if (rc != 0) {
    fprintf(stderr, "omgs-device-probe: the HIP runtime fails: hipError_t %d\n", rc);
    return BROKEN;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: omgs-device-probe cuda|hip -- COMMAND [ARGS...]\n");
    return BROKEN;
  }
  int rc;
  if (strcmp(argv[1], "cuda") == 0) {
    rc = probe_cuda();
  } else if (strcmp(argv[1], "hip") == 0) {
    rc = probe_hip();
  } else {
    fprintf(stderr, "omgs-device-probe: unknown backend '%s' (cuda or hip)\n", argv[1]);
    return BROKEN;
  }
  if (rc != 0) {
    return rc;
  }
  fflush(stdout);
  execvp(argv[3], argv + 3);
  fprintf(stderr, "omgs-device-probe: cannot run '%s'\n", argv[3]);
  perror("execvp");
  return BROKEN;
}
