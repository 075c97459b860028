// omgs-train-synthetic's results: one row per method run, the final table, and the pair
// wires' comparison (--pair-wire with several wires: each wire against the first, same
// planner, same run).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace omgs_synthetic {

/// One method's run: a dense baseline, or one planner with one pair wire in one round.
struct Result {
  std::string method;    ///< the row's label: planner[/wire][#round]
  std::string planner;   ///< omgs rows: the planner; empty for the dense rows
  std::string exchange;  ///< omgs rows: --sparse-exchange's exchange, empty for the runtime's own
  std::string wire;      ///< omgs rows: --pair-wire's wire, empty for the runtime's own
  std::string collectives;        ///< omgs rows: --collectives' item, empty for the runtime's own
  std::vector<std::string> used;  ///< omgs rows: the collectives its plan gives a group
  std::string config;             ///< omgs rows: the label without the round (rows compared by it)
  int round = 0;                  ///< omgs rows: which of --rounds (0-based)
  std::size_t groups = 0;
  double iteration_s = 0;     ///< median over timed iterations of the slowest rank's time
  double not_hidden_s = 0;    ///< median of the slowest rank's wait for communication
  double sparsify_s = 0;      ///< median of the slowest rank's top-k time
  double sparsify_cpu_s = 0;  ///< median of the largest CPU time in it (thread CPU clock)
  double aggregate_s = 0;     ///< median of the slowest rank's scatter-add (or decode) time
  double bytes_per_iter = 0;  ///< each rank sends (mean)
  /// Bytes across the fabric per rank per timed iteration (examples/fabric_bytes.hpp: every
  /// host's interface counters over the timed iterations / ranks); -1: not measurable.
  double fabric_per_iter = -1;
  double pair_bytes = 0;    ///< this rank's allgather pairs' bytes over the timed iterations
  double pairs = 0;         ///< ... and their number (bytes per pair = the ratio)
  double predicted_s = -1;  ///< the plan's predicted iteration (omgs methods)
  /// Mean wall time (slowest rank) of the first warmup + iterations iterations from the
  /// start: what a run of that length pays, the closed loop's exploration and refits
  /// (which iteration_s leaves out) included.
  double run_mean_s = 0;
  std::string note;
  std::vector<double> iters, waits, sparsifies, sparsify_cpus, aggregates;  ///< per timed iteration
  std::vector<double> walls;  ///< per iteration from the start, warm-up included

  /// Records one timed iteration; summarize() turns the records into the medians, which
  /// one stalled iteration (a TCP retransmission, a descheduled rank) does not move.
  void record(double iter, double wait, double sparsify, double sparsify_cpu, double aggregate);
  void summarize();
  /// `walls` gets iteration `it`'s wall time while within the first `n` iterations.
  void record_wall(int it, int n, double wall);
  /// The allgather pairs' mean bytes per pair; 0 without pairs (dense rows, allreduce).
  double bytes_per_pair() const { return pairs > 0 ? pair_bytes / pairs : 0.0; }
};

/// "1.23 MB", "45.6 kB", "1.20 GB".
std::string bytes_text(double b);

/// The table (rank 0): one row per result; speedups against results[0] when `dense`.
/// `loop_warmup`: the closed-loop rows' extra warm-up (their refit windows).
void print_table(int iterations, int warmup, int loop_warmup, bool dense,
                 const std::vector<Result>& results);

/// With several wires: per planner and wire after the first, the ratios of bytes per
/// iteration and of iteration time against the first wire's row of the same round, min /
/// median / max over the rounds, and both plans' groups. Prints nothing for one wire.
void print_wire_comparison(const std::vector<std::string>& wires, int rounds,
                           const std::vector<Result>& results);

/// With several --collectives items (`sets`): per set, its best configuration (least median
/// iteration time over the rounds: min / median / max) and its fabric bytes per rank per
/// iteration (median over the rounds), each against the first set's best. For the later
/// sets only configurations whose plan uses a collective that no plan of the first set uses
/// (a two-level row, say) count: a set's best row that planned as the first set's would
/// compare the same plans. Prints nothing for one set.
void print_collectives_comparison(const std::vector<std::string>& sets, int rounds,
                                  const std::vector<Result>& results);

/// With several omgs rows (configurations): each one's iteration time over the rounds (min /
/// median / max) and its median against the best configuration's median, then whether the
/// runtime's default row is within 5% of the best (or inside the best's spread over the
/// rounds). Prints nothing for one configuration.
void print_config_comparison(int rounds, const std::vector<Result>& results);

}  // namespace omgs_synthetic
