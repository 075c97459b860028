// omgs-train-synthetic: the gradient traffic of a real model, without a deep-learning
// framework. The model's tensor shapes come from examples/models/ (ResNet-50, VGG-16,
// BERT-base, GPT-2 small); each layer's backward is emulated by a Kokkos kernel that writes
// its gradient and costs time in proportion to the layer's backward_s. Every iteration
// runs the backward pass from the last layer to the first, hands each gradient to omgs
// (rt.ready) and waits in rt.finish(), exactly as a training code would.
//
// It compares the planners (by default layerwise, single, mgs, optimal, and "default": the
// runtime with nothing set, its planner closed-loop) with two dense baselines
// (examples/dense_baseline.hpp): gradients fused into 25 MB buckets allreduced as
// each fills, as PyTorch DDP does ("dense-bucket"), and one MPI_Iallreduce per layer
// ("dense-layer"). Every plan uses one performance model, calibrated once per job
// (repeated, medians: examples/shared_calibration.hpp). It prints one line per iteration
// and a table (medians over the timed iterations of the slowest rank's times): iteration
// time, the mean over the first warmup + iterations iterations (run_mean_s: a closed loop's
// exploration and refits included), communication not hidden behind the backward pass,
// top-k and scatter-add (decode) times, bytes each rank sends and per allgather pair, predicted
// time, and which allreduce each dense row used. --sparse-exchange LIST and --pair-wire LIST run
// each planner once per sparse exchange and pair wire, --rounds N every row N times, round after
// round; then each wire's bytes and time against the first wire's, and each configuration's
// median against the best's (with the default row's verdict: scripts/defaults-check.sh).
// --collectives LIST runs each planner once per set of the planner's table of collectives
// (flat, node: with the two-level rows, or rows joined by '+'; examples/synthetic_rows.hpp)
// and compares each set's best row; every row's bytes across the fabric per rank come from
// the hosts' interface counters (examples/fabric_bytes.hpp) where the job spans hosts.
//
//   mpiexec -n 4 omgs-train-synthetic --model resnet50
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <omgs/omgs.hpp>

#include "bounded_mpi.hpp"
#include "dense_baseline.hpp"
#include "emulated_backward.hpp"
#include "fabric_bytes.hpp"
#include "median.hpp"
#include "shared_calibration.hpp"
#include "synthetic_args.hpp"
#include "synthetic_report.hpp"
#include "synthetic_rows.hpp"

namespace {

using omgs_synthetic::Args;
using omgs_synthetic::bytes_text;
using omgs_synthetic::closed_loop;
using omgs_synthetic::Method;
using omgs_synthetic::Result;
using Exec = omgs::ExecSpace;
using Mem = omgs::DeviceMemory;
using omgs_examples::allreduce_or_abort;

constexpr const char* program = "omgs-train-synthetic";

using omgs_train::emulate_layer;
using omgs_train::seed_of;

// ---------------------------------------------------------------------------------------
// Methods
// ---------------------------------------------------------------------------------------

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double max_over_ranks(MPI_Comm comm, double v) {
  double m = 0;
  allreduce_or_abort(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm, "an allreduce of the timings");
  return m;
}

// nonfinite_gradient and plan_failed are agreed by every rank: all throw and exit
// cleanly. Anything else (comm_failed above all) may be this rank's alone: a peer may be
// gone, so MPI_Finalize could hang; abort the job.
void fail_iteration(omgs::Status s, const std::string& error, const std::string& planner, int it) {
  const std::string msg = "[" + planner + "] iteration " + std::to_string(it) + ": " +
                          std::string(omgs::to_string(s)) + ": " + error;
  if (s == omgs::Status::nonfinite_gradient || s == omgs::Status::plan_failed)
    throw omgs::Error(msg);
  omgs_examples::abort_job(MPI_COMM_WORLD, program, msg);
}

/// A refit: both predictions, the window's measured time and what the loop decided.
void print_refit(const std::string& planner, const omgs::RefitReport& r) {
  const char* what = r.taken_back ? "took the previous plan back (the switch measured slower)"
                     : r.explored ? "switched (explore: a predicted tie)"
                     : r.switched ? "switched"
                                  : "kept";
  std::printf(
      "[%-9s] refit: measured %.4f s; predicted %.4f s (plan in force) / %.4f s "
      "(%s, %zu groups), %s; %s\n",
      planner.c_str(), r.measured_iteration_s, r.predicted_current_s, r.predicted_candidate_s,
      std::string(omgs::to_string(r.candidate_planner)).c_str(), r.candidate_groups, what,
      r.model.c_str());
}

/// The closed loop's fitted points (the first 12 groups): elements, sparsify, allgather.
void print_points(const std::string& planner, const omgs::RefitReport& r) {
  std::printf("[%-9s]   points (numel sparsify_s allgather_s):", planner.c_str());
  for (std::size_t g = 0; g < r.group_numel.size() && g < 12; ++g)
    std::printf(" %llu %.2e %.2e;", static_cast<unsigned long long>(r.group_numel[g]),
                r.group_sparsify_s[g], r.group_allgather_s[g]);
  std::printf("%s\n", r.group_numel.size() > 12 ? " ..." : "");
}

/// What every row of the job shares: its performance model (a spec, and loaded), the dense
/// groups' allreduce form and the fabric's counters.
struct Job {
  std::string perf;
  std::unique_ptr<omgs::PerfModel> model;
  omgs::DenseAllreduce dense_form = omgs::DenseAllreduce::automatic;
  omgs_examples::FabricCounter fabric;
};

Result run_omgs(const Args& args, const std::vector<omgs::LayerSpec>& layers,
                const std::vector<int>& reps, const Method& m, const Job& job, int rank, int size) {
  const std::string name = m.label(args);  // the row and the per-iteration lines
  const omgs::RuntimeOptions opt = omgs_synthetic::method_options(
      args, m, job.perf, job.dense_form,
      omgs_synthetic::row_collectives(m.collectives, m.exchange, size, *job.model));
  const bool loop = opt.refit_iterations > 0;
  const int warmup = args.warmup + (loop ? args.refit * (opt.max_replans + 1) : 0);
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  Result r;
  r.method = name;
  r.planner = m.planner;
  r.exchange = m.exchange;
  r.wire = m.wire;
  r.collectives = m.collectives;
  r.round = m.round;
  r.config = m.label(args, "/", false);
  r.groups = rt.plan().groups.size();
  r.predicted_s = rt.plan().predicted.iteration_end_s;
  if (loop) r.note = "closed loop, window " + std::to_string(args.refit);
  if (m.planner == omgs_synthetic::default_method)
    r.note += std::string(", the runtime's defaults: ") +
              std::string(omgs::to_string(opt.planner)) + ", " +
              std::string(omgs::to_string(opt.sparse_exchange)) + ", " +
              std::string(omgs::to_string(opt.pair_wire));
  const auto& groups = rt.plan().groups;
  if (std::any_of(groups.begin(), groups.end(),
                  [](const omgs::Group& g) { return g.collective == omgs::Collective::dense; }))
    r.note += std::string(r.note.empty() ? "" : "; ") +
              "dense groups: " + rt.calibration().dense_allreduce.name();
  for (const omgs::Group& g : groups) {
    const std::string c(omgs::to_string(g.collective));
    if (std::find(r.used.begin(), r.used.end(), c) == r.used.end()) r.used.push_back(c);
  }
  if (!m.collectives.empty())
    r.note += std::string(r.note.empty() ? "" : "; ") +
              "groups: " + omgs_synthetic::groups_by_collective(rt.plan());
  const std::size_t L = layers.size();
  double fabric0 = 0;
  for (int it = 0; it < warmup + args.iterations; ++it) {
    if (it == warmup) fabric0 = job.fabric.sample();
    const auto t0 = std::chrono::steady_clock::now();
    rt.begin_backward();
    for (std::size_t l = L; l-- > 0;) {
      emulate_layer(rt.gradient(l), seed_of(rank, it, l), reps[l]);
      Exec().fence();  // the gradient exists before omgs is told
      const omgs::Status s = rt.ready(l);
      if (s != omgs::Status::ok) fail_iteration(s, rt.last_error(), name, it);
    }
    const omgs::IterationStats st = rt.finish();
    if (st.status != omgs::Status::ok) fail_iteration(st.status, rt.last_error(), name, it);
    r.record_wall(it, args.warmup + args.iterations,
                  max_over_ranks(MPI_COMM_WORLD, seconds_since(t0)));
    const double iter = max_over_ranks(MPI_COMM_WORLD, st.iteration_s);
    const double wait = max_over_ranks(MPI_COMM_WORLD, st.finish_wait_s);
    const double sparsify = max_over_ranks(MPI_COMM_WORLD, st.sparsify_s);
    const double sparsify_cpu = max_over_ranks(MPI_COMM_WORLD, st.sparsify_cpu_s);
    const double aggregate = max_over_ranks(MPI_COMM_WORLD, st.aggregate_s);
    const bool timed = it >= warmup;
    if (timed) {
      r.record(iter, wait, sparsify, sparsify_cpu, aggregate);
      r.bytes_per_iter += static_cast<double>(st.bytes_sent) / args.iterations;
      r.pairs += static_cast<double>(st.pairs_sent);
      r.pair_bytes += static_cast<double>(st.pairs_sent) * st.bytes_per_pair;
    }
    if (!args.quiet && rank == 0)
      std::printf(
          "[%-9s] %s %3d/%d: %.4f s  (sparsify %.4f s, cpu %.4f s, waited %.4f s), %zu groups\n",
          name.c_str(), timed ? "iteration" : "warm-up  ", timed ? it - warmup + 1 : it + 1,
          timed ? args.iterations : warmup, iter, sparsify, sparsify_cpu, wait,
          rt.plan().groups.size());
    if (st.refitted && !args.quiet && rank == 0) print_refit(name, rt.last_refit());
    if (st.refitted && !args.quiet && rank == 0) print_points(name, rt.last_refit());
  }
  if (job.fabric.measurable())
    r.fabric_per_iter = (job.fabric.sample() - fabric0) / size / args.iterations;
  if (loop) {  // settled: the plan and prediction in force, and whose plan it is
    r.groups = rt.plan().groups.size();
    const std::size_t head = std::min(r.note.find(';'), r.note.size());  // the loop's part
    r.note.insert(head, ", settled on " + std::string(omgs::to_string(rt.plan().planner)));
    r.predicted_s = rt.plan().predicted.iteration_end_s;
    if (!args.save_fitted.empty() && rank == 0) rt.save_perf_model(args.save_fitted);
  }
  if (!args.svg.empty() && rank == 0) rt.write_svg(args.svg + "." + m.label(args, ".") + ".svg");
  r.summarize();
  return r;
}

/// A dense run (bucketed, or per layer when bucket_mb == 0); `averaged` gets the last
/// iteration's averaged gradient.
Result run_dense(const Args& args, const std::vector<omgs::LayerSpec>& layers,
                 const std::vector<int>& reps, double bucket_mb,
                 const omgs_examples::FabricCounter& fabric, int rank,
                 std::vector<float>& averaged) {
  std::vector<std::uint64_t> numel;
  for (const omgs::LayerSpec& l : layers) numel.push_back(l.numel);
  omgs::AllreduceFormChoice choice;
  omgs_examples::DenseExchange ex =
      omgs_examples::make_dense_exchange(MPI_COMM_WORLD, numel, bucket_mb, 3, &choice);
  Result r;
  r.method = bucket_mb > 0 ? "dense-bucket" : "dense-layer";
  if (rank == 0) std::printf("%s's allreduce: %s\n", r.method.c_str(), choice.describe().c_str());
  r.groups = ex.num_buckets();
  r.note = ex.variant().describe();
  if (bucket_mb > 0) r.note += ", " + bytes_text(bucket_mb * 1e6) + " buckets";
  double fabric0 = 0;
  for (int it = 0; it < args.warmup + args.iterations; ++it) {
    if (it == args.warmup) fabric0 = fabric.sample();
    const auto t0 = std::chrono::steady_clock::now();
    const omgs_examples::DenseIteration d =
        ex.iterate([&](std::size_t l, const omgs::GradientView& slot) {
          emulate_layer(slot, seed_of(rank, it, l), reps[l]);
        });
    if (it == 0 && rank == args.test_leave) {  // fault injection: this rank leaves
      std::fprintf(stderr, "%s: rank %d: leaving the job (--test-leave)\n", program, rank);
      MPI_Finalize();
      std::_Exit(0);
    }
    r.record_wall(it, args.warmup + args.iterations,
                  max_over_ranks(MPI_COMM_WORLD, seconds_since(t0)));
    const double iter = max_over_ranks(MPI_COMM_WORLD, d.iteration_s);
    const double wait = max_over_ranks(MPI_COMM_WORLD, d.wait_s);
    const bool timed = it >= args.warmup;
    if (timed) {
      r.record(iter, wait, 0.0, 0.0, 0.0);
      r.bytes_per_iter += 4.0 * static_cast<double>(ex.flat().extent(0)) / args.iterations;
    }
    if (!args.quiet && rank == 0)
      std::printf("[%-12s] %s %3d/%d: %.4f s  (waited %.4f s)\n", r.method.c_str(),
                  timed ? "iteration" : "warm-up  ", timed ? it - args.warmup + 1 : it + 1,
                  timed ? args.iterations : args.warmup, iter, wait);
  }
  if (fabric.measurable()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    r.fabric_per_iter = (fabric.sample() - fabric0) / size / args.iterations;
  }
  averaged = ex.averaged();
  r.summarize();
  return r;
}

/// The job's one performance model: with --perf calibrate, calibrated here (repeated,
/// medians) and written to a file of this rank's; otherwise --perf itself. Every plan of
/// the job uses the returned spec, and `dense_form`: the dense allreduce's form the
/// calibration timed (automatic without calibration); `temp` is set when it is a file to
/// remove.
std::string job_perf_model(const Args& args, const std::vector<omgs::LayerSpec>& layers, int rank,
                           bool& temp, omgs::DenseAllreduce& dense_form, int& dense_setting) {
  temp = false;
  dense_form = omgs::DenseAllreduce::automatic;
  dense_setting = -1;
  if (args.perf != "calibrate") return args.perf;
  const omgs_examples::SharedModel m = omgs_examples::calibrate_shared(
      MPI_COMM_WORLD, layers, args.density, args.calibrations, 2,
      omgs::parse_sparse_exchange(omgs_synthetic::calibration_exchange(args)),
      omgs_synthetic::needs_node_lines(args), args.ranks_per_node);
  if (rank == 0) {
    std::printf(
        "calibration x%d (%.2f s), min / median / max over runs; the plans use the\n"
        "medians rounded to 2 digits: %s\n",
        args.calibrations, m.seconds, m.model.describe().c_str());
    std::printf("  dense groups' allreduce: %s\n", m.dense_allreduce.describe().c_str());
    std::vector<std::pair<const char*, omgs_examples::Spread>> rows = {
        {"topk c0_s", m.c0},
        {"topk c1_s", m.c1},
        {"allgather alpha_s", m.alpha},
        {"allgather beta_s_per_byte", m.beta},
        {"allreduce alpha_s", m.ar_alpha},
        {"allreduce beta_s_per_byte", m.ar_beta}};
    if (!m.model.sparse_allreduce_costs().table.empty()) {  // timed: a sparse exchange asked
      rows.push_back({"sparse_allreduce alpha_s", m.sar_alpha});
      rows.push_back({"sparse_allreduce beta_s/B", m.sar_beta});
    }
    if (m.model.line("sparse_node") != nullptr) {  // timed: a row may use it
      rows.push_back({"sparse_node alpha_s", m.node_alpha});
      rows.push_back({"sparse_node beta_s_per_4n", m.node_beta});
      rows.push_back({"allreduce_node alpha_s", m.arn_alpha});
      rows.push_back({"allreduce_node beta_s/4n", m.arn_beta});
    }
    for (const auto& [name, sp] : rows)
      std::printf("  %-26s %10.3e %10.3e %10.3e\n", name, sp.min, sp.median, sp.max);
    if (!args.save_perf.empty()) m.model.save(args.save_perf);
    std::printf("\n");
  }
  dense_form = m.dense_allreduce.form == omgs::AllreduceForm::blocking
                   ? omgs::DenseAllreduce::blocking
                   : omgs::DenseAllreduce::nonblocking;
  dense_setting = m.dense_allreduce.setting;
  temp = true;
  return omgs_examples::write_job_model(MPI_COMM_WORLD, m.model);
}

/// The dense rows must average to the same gradient: bucketing changes the calls, not the sum.
bool dense_results_agree(const std::vector<float>& bucketed, const std::vector<float>& per_layer,
                         int rank) {
  double d = omgs_examples::max_relative_difference(per_layer, bucketed);
  d = max_over_ranks(MPI_COMM_WORLD, d);
  const bool ok = d <= 1e-5;
  if (rank == 0)
    std::printf(
        "dense check: dense-bucket and dense-layer averaged gradients %s (max relative "
        "difference %.3g over %zu elements)\n",
        ok ? "agree" : "DIFFER", d, per_layer.size());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args args = omgs_synthetic::parse_args(argc, argv, rank);
  omgs_examples::job_bound = {program, args.collective_timeout_s};
  int status = 0;
  Kokkos::initialize(argc, argv);
  try {
    const std::string path = omgs_synthetic::find_model(args.model, argv[0]);
    std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(path);
    std::uint64_t total = 0;
    double backward = 0;
    for (omgs::LayerSpec& l : layers) {
      l.numel = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(
                                               static_cast<double>(l.numel) * args.numel_scale)));
      total += l.numel;
      backward += l.backward_s * args.backward_scale;
    }
    const omgs_train::KernelCost cost = omgs_train::calibrate_kernel(MPI_COMM_WORLD);
    const std::vector<int> reps = omgs_train::layer_reps(layers, cost, args.backward_scale);
    if (rank == 0) {
      std::printf(
          "omgs-train-synthetic: %s, %zu tensors, %llu elements; P = %d, density %g, sparse "
          "exchange %s\n",
          path.c_str(), layers.size(), static_cast<unsigned long long>(total), size, args.density,
          omgs_synthetic::exchanges_text(args).c_str());
      std::printf("emulated backward %.4f s per iteration (Kokkos %s); MPI thread level %s\n\n",
                  backward, Exec::name(),
                  provided == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "below MULTIPLE (inline)");
    }
    // A bad --perf is reported now, not after the dense baseline has run.
    if (args.perf != "calibrate") omgs::make_perf_model(args.perf)->check_workers(size);
    bool temp = false;
    int dense_setting = -1;
    Job job{"", nullptr, omgs::DenseAllreduce::automatic,
            omgs_examples::FabricCounter(MPI_COMM_WORLD)};
    job.perf = job_perf_model(args, layers, rank, temp, job.dense_form, dense_setting);
    job.model = omgs::make_perf_model(job.perf);
    omgs_synthetic::print_collectives(args, *job.model, job.fabric, size, rank);
    std::vector<Result> results;
    bool dense_ok = true;
    if (args.dense) {
      std::vector<float> bucketed, per_layer;
      results.push_back(run_dense(args, layers, reps, args.bucket_mb, job.fabric, rank, bucketed));
      results.push_back(run_dense(args, layers, reps, 0.0, job.fabric, rank, per_layer));
      dense_ok = dense_results_agree(bucketed, per_layer, rank);
    }
    // The dense rows' choosers applied their own MPI_T setting (process-wide); the plans run
    // with the one their calibration timed.
    if (job.dense_form != omgs::DenseAllreduce::automatic)
      omgs::apply_allreduce_setting(dense_setting);
    for (const Method& m : omgs_synthetic::methods_in_turn(args))
      results.push_back(run_omgs(args, layers, reps, m, job, rank, size));
    if (temp) omgs_examples::remove_job_model(MPI_COMM_WORLD, job.perf);
    if (rank == 0)
      omgs_synthetic::print_table(args.iterations, args.warmup,
                                  args.refit * (omgs::RuntimeOptions().max_replans + 1), args.dense,
                                  results);
    if (rank == 0) omgs_synthetic::print_wire_comparison(args.pair_wires, args.rounds, results);
    if (rank == 0)
      omgs_synthetic::print_collectives_comparison(args.collectives, args.rounds, results);
    if (rank == 0) omgs_synthetic::print_config_comparison(args.rounds, results);
    if (!dense_ok) status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "omgs-train-synthetic (rank %d): error: %s\n", rank, e.what());
    status = 1;
  }
  Kokkos::finalize();
  return omgs_examples::finalize_bounded(status);
}
