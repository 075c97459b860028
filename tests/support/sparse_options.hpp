// The runtime options of tests whose host references model one exchange: every group
// sparse (the mgs planner), exchanged by the pairs' allgather in 8-byte pairs (values exact).
// The runtime's defaults choose per group (the mixed planner, sparse exchange automatic,
// bf16 pairs: docs/planner.md, "Defaults"); a test of the exact allgather must not depend
// on them.
#pragma once

#include <omgs/runtime.hpp>

namespace omgs_test {

/// RuntimeOptions{} with planner mgs, sparse_exchange allgather and pair_wire pairs8.
inline omgs::RuntimeOptions sparse_options() {
  omgs::RuntimeOptions opt;
  opt.planner = omgs::Planner::mgs;
  opt.sparse_exchange = omgs::SparseExchange::allgather;
  opt.pair_wire = omgs::PairWire::pairs8;
  return opt;
}

}  // namespace omgs_test
