/* A PMPI interposition layer for the fault-injection tests: it defines MPI_Iallgatherv (and
 * MPI 4's MPI_Iallgatherv_c, under the same rule), MPI_Iallgather and MPI_Testsome, which forward
 * to PMPI_* unless told to fail. Linked into a test program, it intercepts the calls libomgs makes.
 * Thread-safe. */
#ifndef OMGS_TEST_MPI_FAULT_H
#define OMGS_TEST_MPI_FAULT_H

#ifdef __cplusplus
extern "C" {
#endif

enum omgs_fault_fn {
  OMGS_FAULT_IALLGATHERV = 0,
  OMGS_FAULT_IALLGATHER,
  OMGS_FAULT_TESTSOME,
  OMGS_FAULT_FNS
};

/* Forget every rule and count. */
void omgs_fault_reset(void);
/* Calls number from .. from+count-1 (1-based, counted from now) of fn return error_code. */
void omgs_fault_fail_calls(int fn, long long from, long long count, int error_code);
/* Every call of fn in the next `seconds` returns error_code. */
void omgs_fault_fail_for(int fn, double seconds, int error_code);
/* The next MPI_Testsome that completes a request reports it as completed in error
 * (MPI_ERR_IN_STATUS with status.MPI_ERROR = error_code), after really completing it. */
void omgs_fault_error_next_completion(int error_code);
/* Calls of fn seen and failures injected since the last reset. */
long long omgs_fault_calls(int fn);
long long omgs_fault_injected(int fn);

#ifdef __cplusplus
}
#endif

#endif
