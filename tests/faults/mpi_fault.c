/* See mpi_fault.h. */
#include "mpi_fault.h"

#include <mpi.h>
#include <pthread.h>
#include <time.h>

typedef struct {
  long long calls;
  long long injected;
  long long fail_from, fail_count; /* call numbers */
  double fail_until;               /* monotonic seconds; 0: none */
  int error_code;
} rule;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rule rules[OMGS_FAULT_FNS];
static int completion_error = 0; /* armed error code, 0: none */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Counts the call; returns the error code to inject, or 0. */
static int should_fail(int fn) {
  int code = 0;
  pthread_mutex_lock(&lock);
  rule* r = &rules[fn];
  ++r->calls;
  if ((r->fail_count > 0 && r->calls >= r->fail_from && r->calls < r->fail_from + r->fail_count) ||
      (r->fail_until > 0 && now_s() < r->fail_until)) {
    code = r->error_code;
    ++r->injected;
  }
  pthread_mutex_unlock(&lock);
  return code;
}

void omgs_fault_reset(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < OMGS_FAULT_FNS; ++i) {
    rule z = {0, 0, 0, 0, 0.0, 0};
    rules[i] = z;
  }
  completion_error = 0;
  pthread_mutex_unlock(&lock);
}

void omgs_fault_fail_calls(int fn, long long from, long long count, int error_code) {
  pthread_mutex_lock(&lock);
  rules[fn].fail_from = rules[fn].calls + from;
  rules[fn].fail_count = count;
  rules[fn].error_code = error_code;
  pthread_mutex_unlock(&lock);
}

void omgs_fault_fail_for(int fn, double seconds, int error_code) {
  pthread_mutex_lock(&lock);
  rules[fn].fail_until = now_s() + seconds;
  rules[fn].error_code = error_code;
  pthread_mutex_unlock(&lock);
}

void omgs_fault_error_next_completion(int error_code) {
  pthread_mutex_lock(&lock);
  completion_error = error_code;
  pthread_mutex_unlock(&lock);
}

long long omgs_fault_calls(int fn) {
  pthread_mutex_lock(&lock);
  const long long n = rules[fn].calls;
  pthread_mutex_unlock(&lock);
  return n;
}

long long omgs_fault_injected(int fn) {
  pthread_mutex_lock(&lock);
  const long long n = rules[fn].injected;
  pthread_mutex_unlock(&lock);
  return n;
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  const int code = should_fail(OMGS_FAULT_IALLGATHERV);
  if (code != 0) return code;
  return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                          request);
}

#if MPI_VERSION >= 4
/* The pairs' wire posts the large-count call where MPI has it (MPICH 4): the same rule. */
int MPI_Iallgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                      void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[],
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const int code = should_fail(OMGS_FAULT_IALLGATHERV);
  if (code != 0) return code;
  return PMPI_Iallgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
}
#endif

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const int code = should_fail(OMGS_FAULT_IALLGATHER);
  if (code != 0) return code;
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const int code = should_fail(OMGS_FAULT_TESTSOME);
  if (code != 0) return code; /* requests untouched, as if MPI failed before testing */
  const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  if (rc != MPI_SUCCESS || *outcount == MPI_UNDEFINED || *outcount == 0 ||
      statuses == MPI_STATUSES_IGNORE)
    return rc;
  pthread_mutex_lock(&lock);
  const int err = completion_error;
  completion_error = 0;
  if (err != 0) ++rules[OMGS_FAULT_TESTSOME].injected;
  pthread_mutex_unlock(&lock);
  if (err == 0) return rc;
  for (int i = 0; i < *outcount; ++i) statuses[i].MPI_ERROR = MPI_SUCCESS;
  statuses[0].MPI_ERROR = err;
  return MPI_ERR_IN_STATUS;
}
