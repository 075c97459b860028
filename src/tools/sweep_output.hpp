// omgs-plan --workers-sweep: the table and the JSON document of a sweep.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <omgs/sweep.hpp>

namespace omgs_plan {

/// What the sweep was run on, printed with it.
struct SweepInputs {
  std::string model;     ///< the model CSV
  std::string perf;      ///< the --perf spec
  std::string topk;      ///< the --topk file, or empty
  std::string describe;  ///< the perf model's describe()
  double density = 0.0;
};

/// One row per P: the predicted iteration of each plan, mixed's speed-ups, and the
/// communication not hidden behind the backward pass (mixed's; the JSON has every plan's).
void print_sweep_table(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                       const SweepInputs& in);
/// {"model", "perf", "topk", "describe", "density", "sweep": [{"workers", "dense_s", ...}]}.
void print_sweep_json(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                      const SweepInputs& in);

}  // namespace omgs_plan
