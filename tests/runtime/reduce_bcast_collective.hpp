// A test-only collective, "reduce_bcast": a dense group summed by MPI_Ireduce to rank 0, then
// MPI_Ibcast of the sum, on a communicator of its own (a phased wire). Everything it needs
// is in its own file (reduce_bcast_collective.cpp): its row in the planner's table (timed by
// the model's line "reduce_bcast"), the bytes of that line and how calibration times it, its
// wire and its exchange (the dense exchange's prepare and complete, its own wire).
// register_reduce_bcast() is the one registration; nothing of omgs is edited for it (issue 44: a
// collective is a row).
#pragma once

#include <omgs/plan.hpp>

namespace omgs_test {

/// Registers the collective on this rank (once; later calls return the same id). Call it on
/// every rank before constructing a Runtime that may use it.
omgs::Collective register_reduce_bcast();

/// Posts made by the reduce_bcast wires of this process (every exchange counts one).
long reduce_bcast_posts();

/// Times its line was calibrated by this process (a Runtime that calibrates and allows it).
long reduce_bcast_calibrations();

}  // namespace omgs_test
