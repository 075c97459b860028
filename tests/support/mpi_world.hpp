// The calling process's rank and the size of MPI_COMM_WORLD, for the MPI test programs.
#pragma once

#include <mpi.h>

namespace omgs_test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace omgs_test
