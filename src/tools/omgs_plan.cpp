// omgs-plan: plans the merged groups of a model description offline, with the same
// planners and performance models the runtime uses at init.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

#include "footprint_output.hpp"
#include "plan_text.hpp"
#include "sweep_output.hpp"

namespace {

constexpr const char* usage_text =
    "usage: omgs-plan --model FILE.csv (--workers P | --workers-sweep LIST) --density D\n"
    "                 [--perf reference|FILE.json] [--topk FILE.json] [--planner "
    "mgs|layerwise|single|threshold|optimal|mgs_mixed|dense|mixed|automatic|all]\n"
    "                 [--threshold NUMEL] [--choice-margin M] [--optimal-work N]\n"
    "                 [--sparse-exchange allgather|allreduce|automatic] [--dense-wire fp32|bf16]\n"
    "                 [--memory-budget BYTES] [--max-mpi-count N|int]\n"
    "                 [--max-group-numel N|u32] [--footprint]\n"
    "                 [--ranks-per-node G]\n"
    "                 [--format table|json]\n"
    "                 [--svg FILE.svg]\n"
    "\n"
    "Groups the gradient tensors of a model (CSV: header name,numel,backward_s; one row per\n"
    "tensor in forward order) for merged gradient sparsification, and predicts the pipeline.\n"
    "\n"
    "  --model FILE     model description (see examples/models/)\n"
    "  --workers P      number of ranks (>= 1)\n"
    "  --workers-sweep LIST  e.g. 2,4,...,4096: predicted iteration time of the dense (fp32\n"
    "                   and bf16), all-sparse MGS, optimal and mixed plans for each P (table or "
    "json;\n"
    "                   --svg draws the crossover); needs a model with allreduce costs\n"
    "  --density D      fraction of gradient entries top-k keeps, 0 < D <= 1\n"
    "  --perf SPEC      'reference' (the OMGS-SGD paper's cluster; P in 2,4,8,16) or an\n"
    "                   alpha-beta JSON file (default: reference)\n"
    "  --topk FILE      replace the perf model's top-k cost by FILE's \"topk\" member (a\n"
    "                   GPU's model, examples/perf/gpu_topk_*.json, or a saved model)\n"
    "  --planner NAME   mixed (default, as the runtime's: mgs_mixed, optimal or dense where\n"
    "                   the model has allreduce costs, else mgs or optimal), mgs, layerwise,\n"
    "                   single, threshold, optimal, mgs_mixed, dense, or all to compare\n"
    "  --threshold N    group size of the threshold planner in elements (default 8192)\n"
    "  --choice-margin M  mixed, automatic and the sweep's mixed: plans predicted within\n"
    "                   M x the best are near-ties, which go to fewer groups (default 0.1;\n"
    "                   0: the strict minimum)\n"
    "  --sparse-exchange E  how sparse groups are exchanged: allgather (default, as the\n"
    "                   runtime's), allreduce or automatic (the faster per group); the\n"
    "                   sweep adds the all-sparse-allreduce column when the model knows it\n"
    "  --optimal-work N the optimal and dense searches' budget (model evaluations plus state\n"
    "                   updates, default 30000000); past it the plan is approximate, with\n"
    "                   its gap bound reported\n"
    "  --memory-budget BYTES  bytes per rank one group's exchange may allocate (e.g. 512MiB,\n"
    "                   2GiB; 0: no limit, the default): the choosing planners (mgs_mixed,\n"
    "                   optimal, dense, mixed) give no group a collective that needs more\n"
    "                   (docs/planner.md, \"The table of collectives\")\n"
    "  --max-mpi-count N  the largest count one MPI call may pass (int: 2147483647, what the\n"
    "                   runtime's wires allow; default: no limit)\n"
    "  --max-group-numel N  the most elements one group may hold (u32: 4294967295, what the\n"
    "                   runtime's 32-bit indices allow; default: no limit): no planner merges\n"
    "                   past it where the layers allow\n"
    "  --footprint      also print the bytes per rank each group's exchange allocates and\n"
    "                   the plan's sum (with --workers-sweep: one line per P)\n"
    "  --ranks-per-node G  with --workers-sweep: nodes of G ranks (default 1: flat). The --perf\n"
    "                   file's \"node_link\" is the intra-node link; the two-level rows\n"
    "                   (allreduce_node, sparse_node) are modelled and may be chosen per\n"
    "                   group, the dense baselines take the two-level allreduce where faster,\n"
    "                   and the all-node-summed plan is added (docs/planner.md, \"Node shapes\");\n"
    "                   G must divide every P\n"
    "  --dense-wire W   the dense groups' values (RuntimeOptions::dense_wire): fp32 (default:\n"
    "                   the model's bytes per element) or bf16 / fp16 (2 bytes per element)\n"
    "  --format F       table (default) or json\n"
    "  --svg FILE       also draw the predicted pipeline as an SVG Gantt chart (one block of\n"
    "                   compute / top-k / communication lanes per planner)\n";

struct Args {
  std::string model;
  std::string workers;
  std::string sweep;
  std::string density;
  std::string perf = "reference";
  std::string topk;
  /// The runtime's defaults: what a run with nothing set would plan.
  std::string planner{omgs::to_string(omgs::default_planner)};
  std::string threshold = "8192";
  std::string margin = "0.1";
  std::string exchange{omgs::to_string(omgs::default_sparse_exchange)};
  std::string budget_work;
  std::string format = "table";
  std::string svg;
  std::string memory_budget;
  std::string max_mpi_count;
  std::string max_group_numel;
  std::string dense_wire = "fp32";
  std::string ranks_per_node;
  bool footprint = false;
};

[[noreturn]] void die(const std::string& message, int code = 1) {
  std::cerr << "omgs-plan: error: " << message << "\n";
  std::exit(code);
}

long long parse_int(const std::string& text, const char* option) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    die(std::string(option) + " '" + text + "' is not a positive integer", 2);
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) die(std::string(option) + " '" + text + "' is too large", 2);
  return v;
}

double parse_double(const std::string& text, const char* option) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    die(std::string(option) + " '" + text + "' is not a number", 2);
  return v;
}

Args parse_args(int argc, char** argv) {
  Args a;
  bool have_model = false, have_workers = false, have_density = false;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      std::cout << usage_text;
      std::exit(0);
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("option " + opt + " needs a value\n" + usage_text, 2);
      return argv[++i];
    };
    if (opt == "--model") {
      a.model = value();
      have_model = true;
    } else if (opt == "--workers") {
      a.workers = value();
      have_workers = true;
    } else if (opt == "--workers-sweep") {
      a.sweep = value();
      have_workers = true;
    } else if (opt == "--density") {
      a.density = value();
      have_density = true;
    } else if (opt == "--perf") {
      a.perf = value();
    } else if (opt == "--topk") {
      a.topk = value();
      if (a.topk.empty()) die("--topk needs a file name", 2);
    } else if (opt == "--planner") {
      a.planner = value();
    } else if (opt == "--threshold") {
      a.threshold = value();
    } else if (opt == "--optimal-work") {
      a.budget_work = value();
    } else if (opt == "--choice-margin") {
      a.margin = value();
    } else if (opt == "--sparse-exchange") {
      a.exchange = value();
    } else if (opt == "--memory-budget") {
      a.memory_budget = value();
    } else if (opt == "--dense-wire") {
      a.dense_wire = value();
    } else if (opt == "--ranks-per-node") {
      a.ranks_per_node = value();
    } else if (opt == "--max-mpi-count") {
      a.max_mpi_count = value();
    } else if (opt == "--max-group-numel") {
      a.max_group_numel = value();
    } else if (opt == "--footprint") {
      a.footprint = true;
    } else if (opt == "--format") {
      a.format = value();
    } else if (opt == "--svg") {
      a.svg = value();
      if (a.svg.empty()) die("--svg needs a file name", 2);
    } else {
      die("unknown option '" + opt + "'\n" + usage_text, 2);
    }
  }
  if (!have_model) die("--model FILE.csv is required\n" + std::string(usage_text), 2);
  if (!have_workers) die("--workers P is required\n" + std::string(usage_text), 2);
  if (!a.sweep.empty() && !a.workers.empty())
    die("--workers and --workers-sweep exclude each other", 2);
  if (!have_density) die("--density D is required\n" + std::string(usage_text), 2);
  if (!a.ranks_per_node.empty() && a.sweep.empty())
    die("--ranks-per-node needs --workers-sweep", 2);
  return a;
}

using omgs_plan::print_comparison;
using omgs_plan::print_plan_table;
using omgs_plan::seconds;

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) die("--svg: cannot open '" + path + "' for writing");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) die("--svg: writing '" + path + "' failed");
}

omgs::OptimalBudget budget_of(const Args& args) {
  omgs::OptimalBudget budget;
  if (!args.budget_work.empty()) {
    const long long work = parse_int(args.budget_work, "--optimal-work");
    if (work < 1) die("--optimal-work must be >= 1", 2);
    budget.max_work = static_cast<std::uint64_t>(work);
  }
  return budget;
}

// --memory-budget, --max-mpi-count and --max-group-numel into the config's limits (0: none).
void apply_limits(const Args& args, omgs::PlanConfig& config) {
  if (!args.memory_budget.empty()) {
    try {
      config.memory_budget_bytes = omgs::parse_byte_size(args.memory_budget);
    } catch (const omgs::Error& e) {
      const std::string what = e.what();
      die("--memory-budget " + what.substr(what.rfind("omgs: ", 0) == 0 ? 6 : 0), 2);
    }
  }
  if (args.max_mpi_count == "int")
    config.max_mpi_count = INT_MAX;
  else if (!args.max_mpi_count.empty())
    config.max_mpi_count =
        static_cast<std::uint64_t>(parse_int(args.max_mpi_count, "--max-mpi-count"));
  if (args.max_group_numel == "u32")
    config.max_group_numel = std::numeric_limits<std::uint32_t>::max();
  else if (!args.max_group_numel.empty())
    config.max_group_numel =
        static_cast<std::uint64_t>(parse_int(args.max_group_numel, "--max-group-numel"));
}

// --ranks-per-node G and the --perf file's intra-node link (G = 1: flat, no link read).
omgs::NodeShape node_shape_of(const Args& args, const omgs::PerfModel& model) {
  omgs::NodeShape node;
  if (args.ranks_per_node.empty()) return node;
  const long long g = parse_int(args.ranks_per_node, "--ranks-per-node");
  if (g < 1 || g > (1 << 24)) die("--ranks-per-node " + args.ranks_per_node + " must be >= 1", 2);
  node.ranks_per_node = static_cast<int>(g);
  if (g == 1) return node;
  if (model.as_alpha_beta() == nullptr)
    die("--ranks-per-node needs an alpha-beta --perf model (a fabric file with a node_link)", 2);
  node.link = omgs::load_node_link(args.perf);
  return node;
}

int run_sweep(const Args& args, const std::vector<omgs::LayerSpec>& layers,
              const omgs::PerfModel& model, const omgs::PlanConfig& config) {
  const omgs::NodeShape node = node_shape_of(args, model);
  const std::vector<omgs::SweepRow> rows = omgs::sweep_workers(
      layers, model, config.density, omgs::parse_workers_list(args.sweep), budget_of(args),
      config.choice_margin, config.sparse_exchange, config.memory_budget_bytes,
      config.max_mpi_count, node, config.max_group_numel);
  const std::string describe = node.ranks_per_node > 1
                                   ? omgs::NodeModel(*model.as_alpha_beta(), node).describe()
                                   : model.describe();
  const omgs_plan::SweepInputs in{args.model, args.perf, args.topk, describe, config.density};
  if (!args.svg.empty()) {
    std::ostringstream title;
    title << args.model << ": density " << config.density << ", " << in.describe;
    write_file(args.svg, omgs::sweep_svg(rows, title.str()));
  }
  if (args.format == "json") {
    omgs_plan::print_sweep_json(std::cout, rows, in);
  } else {
    omgs_plan::print_sweep_table(std::cout, rows, in);
    if (args.footprint) omgs_plan::print_sweep_footprint(std::cout, rows, config.density);
  }
  return 0;
}

// The --perf model, with the --topk file's top-k and --dense-wire's bytes per element.
std::unique_ptr<omgs::PerfModel> load_model(const Args& args) {
  if (args.dense_wire != "fp32" && args.dense_wire != "bf16" && args.dense_wire != "fp16")
    die("--dense-wire '" + args.dense_wire + "' is not fp32, bf16 or fp16", 2);
  std::unique_ptr<omgs::PerfModel> model = omgs::make_perf_model(args.perf);
  if (args.topk.empty() && args.dense_wire == "fp32") return model;
  const omgs::AlphaBetaModel* ab = model->as_alpha_beta();
  if (ab == nullptr)
    die(std::string(args.topk.empty() ? "--dense-wire" : "--topk") +
            " needs an alpha-beta --perf model (a JSON file)",
        2);
  omgs::AlphaBetaModel m = args.topk.empty() ? *ab : ab->with_topk(omgs::load_topk_cost(args.topk));
  if (args.dense_wire != "fp32") m = m.with_allreduce_element_bytes(2.0);
  return std::make_unique<omgs::AlphaBetaModel>(std::move(m));
}

// The options into a PlanConfig, each checked (exit 2 naming the option).
omgs::PlanConfig config_of(const Args& args) {
  omgs::PlanConfig config;
  const long long workers = args.sweep.empty() ? parse_int(args.workers, "--workers") : 1;
  if (workers < 1 || workers > (1 << 24)) die("--workers " + args.workers + " must be >= 1", 2);
  config.workers = static_cast<int>(workers);
  config.density = parse_double(args.density, "--density");
  if (!(config.density > 0.0 && config.density <= 1.0))
    die("--density " + args.density + " is outside (0, 1]", 2);
  config.threshold_numel = static_cast<std::uint64_t>(parse_int(args.threshold, "--threshold"));
  if (config.threshold_numel == 0) die("--threshold must be >= 1", 2);
  config.choice_margin = parse_double(args.margin, "--choice-margin");
  if (!(config.choice_margin >= 0.0 && config.choice_margin <= 1.0))
    die("--choice-margin " + args.margin + " is outside [0, 1]", 2);
  config.sparse_exchange = omgs::parse_sparse_exchange(args.exchange);
  if (args.format != "table" && args.format != "json")
    die("--format '" + args.format + "' is not table or json", 2);
  if (args.footprint && args.format != "table")
    die("--footprint prints tables: not --format json", 2);
  apply_limits(args, config);
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    const omgs::PlanConfig config = config_of(args);
    if (!args.sweep.empty()) {
      const std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(args.model);
      return run_sweep(args, layers, *load_model(args), config);
    }
    std::vector<omgs::Planner> planners;
    const std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(args.model);
    const std::unique_ptr<omgs::PerfModel> model = load_model(args);
    model->check_workers(config.workers);
    if (args.planner == "all") {
      planners = omgs::all_planners();
      if (model->knows_allreduce(config.workers))
        for (omgs::Planner p : omgs::choice_planners()) planners.push_back(p);
    } else
      planners.push_back(omgs::parse_planner(args.planner));

    std::vector<omgs::Plan> plans;
    for (omgs::Planner p : planners)
      plans.push_back(omgs::make_plan(p, layers, *model, config, budget_of(args)));
    if (!args.svg.empty()) {
      std::vector<omgs::LabeledTimeline> rows;
      for (const omgs::Plan& p : plans)
        rows.push_back({std::string(omgs::to_string(p.planner)) + " (predicted)", p.predicted});
      std::ostringstream title;
      title << args.model << ": P = " << config.workers << ", density = " << config.density << ", "
            << model->describe();
      write_file(args.svg, omgs::timeline_svg(rows, title.str()));
    }

    if (args.format == "json") {
      if (plans.size() == 1) {
        std::cout << omgs::plan_to_json(plans[0], layers, config);
      } else {
        std::cout << "{\"workers\": " << config.workers << ", \"plans\": {";
        for (std::size_t i = 0; i < plans.size(); ++i) {
          std::cout << (i ? ",\n" : "\n") << "\"" << omgs::to_string(plans[i].planner)
                    << "\": " << omgs::plan_to_json(plans[i], layers, config);
        }
        std::cout << "}}\n";
      }
      return 0;
    }

    std::uint64_t total = 0;
    double backward = 0.0;
    for (const omgs::LayerSpec& l : layers) {
      total += l.numel;
      backward += l.backward_s;
    }
    std::cout << "model " << args.model << ": " << layers.size() << " tensors, " << total
              << " elements, backward " << seconds(backward) << " s\n"
              << "P = " << config.workers << ", density = " << config.density
              << ", perf model: " << model->describe() << "\n\n";
    if (plans.size() == 1) {
      print_plan_table(std::cout, plans[0], layers);
      if (args.footprint)
        omgs_plan::print_plan_footprint(std::cout, plans[0], layers, config.workers,
                                        config.density);
    } else {
      print_comparison(std::cout, plans);
      if (args.footprint)
        omgs_plan::print_plans_footprint(std::cout, plans, config.workers, config.density);
    }
    return 0;
  } catch (const omgs::Error& e) {
    die(e.what());
  }
}
