#include "synthetic_args.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <omgs/omgs.hpp>

namespace omgs_synthetic {
namespace {

constexpr const char* usage_text =
    "usage: omgs-train-synthetic [--model NAME|FILE.csv] [options]\n"
    "\n"
    "Emulates the backward pass of a real model (its tensor shapes and per-layer backward\n"
    "times) and communicates its gradients with omgs under several planners, and densely:\n"
    "fused into buckets (as DDP) and per layer, with MPI_Iallreduce.\n"
    "\n"
    "  --model M           resnet50 (default), vgg16, bert_base, gpt2_small, or a CSV file\n"
    "  --iterations N      timed iterations per method (default 10)\n"
    "  --warmup N          untimed iterations first (default 2)\n"
    "  --density D         fraction of each group's entries sent (default 0.001)\n"
    "  --planners LIST     comma-separated: layerwise,single,threshold,mgs,optimal,\n"
    "                      mgs_mixed,dense,mixed (sparse or dense per group),automatic,\n"
    "                      default (the runtime with nothing set: its planner closed-\n"
    "                      loop, its exchange and wire; run once per round) (default\n"
    "                      layerwise,single,mgs,optimal,default); NAME+loop runs it\n"
    "                      closed-loop: refit and replan on the run (docs/planner.md)\n"
    "  --sparse-exchange LIST  comma-separated: allgather, allreduce (the sparse\n"
    "                      allreduce: the global top-k of the summed pairs) or automatic\n"
    "                      (as the plan says per group): each planner runs once per\n"
    "                      exchange (default: the runtime's)\n"
    "  --pair-wire LIST    comma-separated pair wires of the allgather groups (pairs8,\n"
    "                      fp32, bf16, fp16): each planner runs once per wire, and the\n"
    "                      table is followed by each wire's bytes and time against the\n"
    "                      first's (default: the runtime's, OMGS_PAIR_WIRE or pairs8)\n"
    "  --collectives LIST  comma-separated sets of the planner's table of collectives:\n"
    "                      flat (the runtime's own: the exchange's and dense), node (flat\n"
    "                      and the two-level rows, sparse_node and allreduce_node, where\n"
    "                      the job's model has their lines; the calibration times\n"
    "                      them) or rows joined by '+' (sparse_node+dense): each\n"
    "                      planner runs once per set, and the table is followed by the\n"
    "                      best row of each set against the first set's, with the bytes\n"
    "                      each rank sends across the fabric (default: the runtime's)\n"
    "  --ranks-per-node G  ranks per node of the two-level rows (default 0: the ranks that\n"
    "                      share memory; OMGS_RANKS_PER_NODE wins); G must divide the ranks\n"
    "  --rounds N          run every row N times, a round after another (default 1):\n"
    "                      the comparisons give min / median / max over the rounds;\n"
    "                      with several rows, each against the best row's median\n"
    "  --refit N           closed-loop window in iterations (default the runtime's, 5);\n"
    "                      the loop settles within 3 windows, which are added to its\n"
    "                      warm-up (run_mean_s counts them)\n"
    "  --save-fitted FILE  rank 0 writes the last closed-loop run's fitted model (for --perf)\n"
    "  --no-dense          skip the dense MPI_Iallreduce baselines\n"
    "  --bucket-mb MB      dense-bucket's bucket size in MB of floats (default 25)\n"
    "  --perf SPEC         calibrate (default: once, shared by every plan), reference, or\n"
    "                      an alpha-beta JSON file\n"
    "  --calibrations N    with --perf calibrate: repeat it N times, use the medians\n"
    "                      (default 3)\n"
    "  --save-perf FILE    rank 0 writes the job's alpha-beta model there (for --perf)\n"
    "  --backward-scale S  emulated backward = S x the model's backward_s (default 1)\n"
    "  --numel-scale S     shrink (S < 1) every tensor, for quick runs (default 1)\n"
    "  --trace PREFIX      Chrome trace per method and rank: PREFIX.<method>.<rank>.json\n"
    "  --svg PREFIX        predicted vs measured Gantt chart per method (rank 0):\n"
    "                      PREFIX.<method>.svg\n"
    "  --quiet             only the final table\n"
    "  --collective-timeout S  bound of this program's own collectives: past it the job is\n"
    "                      aborted, naming the collective (default 300)\n"
    "  --test-leave RANK   (fault injection) rank RANK leaves the job after its first dense\n"
    "                      iteration, as a rank that failed would\n";

[[noreturn]] void usage_error(int rank, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "omgs-train-synthetic: error: %s\n", message.c_str());
  MPI_Finalize();
  std::exit(2);
}

double number(int rank, const std::string& opt, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream m;
    m << opt << " '" << text << "' must be a number in [" << lo << ", " << hi << "]";
    usage_error(rank, m.str());
  }
  return v;
}

/// The items of a comma-separated `text` of option `opt`, each checked by `check` (which
/// throws omgs::Error naming the item): a bad item is a usage error naming the option.
template <class Check>
std::vector<std::string> checked_list(int rank, const std::string& opt, const std::string& text,
                                      Check check) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      check(item);
    } catch (const omgs::Error& e) {
      usage_error(rank, opt + ": " + e.what());
    }
    items.push_back(item);
  }
  return items;
}

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

}  // namespace

bool closed_loop(const std::string& method) {
  return method.size() > 5 && method.compare(method.size() - 5, 5, "+loop") == 0;
}

Args parse_args(int argc, char** argv, int rank) {
  Args a;
  a.refit = omgs::RuntimeOptions().refit_iterations;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      if (rank == 0) std::printf("%s", usage_text);
      MPI_Finalize();
      std::exit(0);
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(rank, "option " + opt + " needs a value");
      return argv[++i];
    };
    if (opt == "--model") {
      a.model = value();
    } else if (opt == "--iterations") {
      a.iterations = static_cast<int>(number(rank, opt, value(), 1, 1e6));
    } else if (opt == "--warmup") {
      a.warmup = static_cast<int>(number(rank, opt, value(), 0, 1e6));
    } else if (opt == "--density") {
      a.density = number(rank, opt, value(), 1e-12, 1.0);
    } else if (opt == "--planners") {
      a.planners = checked_list(rank, opt, value(), [](const std::string& p) {
        if (p != default_method)
          (void)omgs::parse_planner(closed_loop(p) ? p.substr(0, p.size() - 5) : p);
      });
    } else if (opt == "--sparse-exchange") {
      a.sparse_exchanges = checked_list(
          rank, opt, value(), [](const std::string& e) { (void)omgs::parse_sparse_exchange(e); });
    } else if (opt == "--pair-wire") {
      a.pair_wires = checked_list(rank, opt, value(),
                                  [](const std::string& w) { (void)omgs::parse_pair_wire(w); });
    } else if (opt == "--collectives") {
      a.collectives = checked_list(rank, opt, value(), [](const std::string& c) {
        if (c == "flat" || c == "node") return;
        std::string list = c;
        std::replace(list.begin(), list.end(), '+', ',');
        if (omgs::parse_collective_set(list).empty())
          throw omgs::Error("an empty set of collectives");
      });
    } else if (opt == "--ranks-per-node") {
      a.ranks_per_node = static_cast<int>(number(rank, opt, value(), 1, 1e6));
    } else if (opt == "--rounds") {
      a.rounds = static_cast<int>(number(rank, opt, value(), 1, 1000));
    } else if (opt == "--no-dense") {
      a.dense = false;
    } else if (opt == "--bucket-mb") {
      a.bucket_mb = number(rank, opt, value(), 1e-6, 2048);
    } else if (opt == "--perf") {
      a.perf = value();
    } else if (opt == "--calibrations") {
      a.calibrations = static_cast<int>(number(rank, opt, value(), 1, 100));
    } else if (opt == "--save-perf") {
      a.save_perf = value();
    } else if (opt == "--refit") {
      a.refit = static_cast<int>(number(rank, opt, value(), 1, 1e4));
    } else if (opt == "--save-fitted") {
      a.save_fitted = value();
    } else if (opt == "--backward-scale") {
      a.backward_scale = number(rank, opt, value(), 0, 1e6);
    } else if (opt == "--numel-scale") {
      a.numel_scale = number(rank, opt, value(), 1e-9, 1.0);
    } else if (opt == "--trace") {
      a.trace = value();
    } else if (opt == "--svg") {
      a.svg = value();
    } else if (opt == "--quiet") {
      a.quiet = true;
    } else if (opt == "--collective-timeout") {
      a.collective_timeout_s = number(rank, opt, value(), 1e-3, 1e6);
    } else if (opt == "--test-leave") {
      a.test_leave = static_cast<int>(number(rank, opt, value(), 0, 1e6));
    } else {
      usage_error(rank, "unknown option '" + opt + "' (see --help)");
    }
  }
  if (a.planners.empty() && !a.dense) usage_error(rank, "nothing to run");
  // OMGS_PAIR_WIRE wins over RuntimeOptions::pair_wire: the rows would be mislabelled.
  if (!a.pair_wires.empty() && std::getenv("OMGS_PAIR_WIRE") != nullptr)
    usage_error(rank, "--pair-wire and OMGS_PAIR_WIRE are both set (the variable would win)");
  if (!a.sparse_exchanges.empty() && std::getenv("OMGS_SPARSE_EXCHANGE") != nullptr)
    usage_error(rank,
                "--sparse-exchange and OMGS_SPARSE_EXCHANGE are both set (the variable would win)");
  return a;
}

std::string calibration_exchange(const Args& args) {
  // The default row, and every row without --sparse-exchange, use the runtime's exchange.
  const bool runtime_exchange =
      args.sparse_exchanges.empty() ||
      std::find(args.planners.begin(), args.planners.end(), default_method) != args.planners.end();
  bool sar = runtime_exchange && omgs::default_sparse_exchange != omgs::SparseExchange::allgather;
  for (const std::string& e : args.sparse_exchanges) sar = sar || e != "allgather";
  return sar ? "automatic" : "allgather";
}

bool needs_node_lines(const Args& args) {
  for (const std::string& c : args.collectives) {
    const std::string items = "+" + c + "+";
    if (c == "node" || items.find("+sparse_node+") != std::string::npos ||
        items.find("+allreduce_node+") != std::string::npos)
      return true;
  }
  return false;
}

std::string find_model(const std::string& name, const char* argv0) {
  if (file_exists(name)) return name;
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("OMGS_MODELS_DIR")) dirs.push_back(d);
  std::string exe = argv0;
  const std::size_t slash = exe.find_last_of('/');
  if (slash != std::string::npos)
    dirs.push_back(exe.substr(0, slash) + "/../" + OMGS_INSTALL_MODELS_SUBDIR);
  dirs.push_back(OMGS_SOURCE_MODELS_DIR);
  for (const std::string& d : dirs)
    if (file_exists(d + "/" + name + ".csv")) return d + "/" + name + ".csv";
  return name;  // load_model_csv names it in its error
}

}  // namespace omgs_synthetic
