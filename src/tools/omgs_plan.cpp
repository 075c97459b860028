// omgs-plan: plans the merged groups of a model description offline, with the same
// planners and performance models the runtime uses at init.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

namespace {

constexpr const char* usage_text =
    "usage: omgs-plan --model FILE.csv (--workers P | --workers-sweep LIST) --density D\n"
    "                 [--perf reference|FILE.json] [--planner "
    "mgs|layerwise|single|threshold|optimal|mgs_mixed|dense|mixed|automatic|all]\n"
    "                 [--threshold NUMEL] [--choice-margin M] [--format table|json]\n"
    "                 [--svg FILE.svg]\n"
    "\n"
    "Groups the gradient tensors of a model (CSV: header name,numel,backward_s; one row per\n"
    "tensor in forward order) for merged gradient sparsification, and predicts the pipeline.\n"
    "\n"
    "  --model FILE     model description (see examples/models/)\n"
    "  --workers P      number of ranks (>= 1)\n"
    "  --workers-sweep LIST  e.g. 2,4,...,4096: predicted iteration time of the dense,\n"
    "                   all-sparse MGS, optimal and mixed plans for each P (table or json;\n"
    "                   --svg draws the crossover); needs a model with allreduce costs\n"
    "  --density D      fraction of gradient entries top-k keeps, 0 < D <= 1\n"
    "  --perf SPEC      'reference' (the OMGS-SGD paper's cluster; P in 2,4,8,16) or an\n"
    "                   alpha-beta JSON file (default: reference)\n"
    "  --planner NAME   mgs (default), layerwise, single, threshold, optimal, mgs_mixed,\n"
    "                   dense, mixed (the last three need allreduce costs), or all to compare\n"
    "  --threshold N    group size of the threshold planner in elements (default 8192)\n"
    "  --choice-margin M  mixed, automatic and the sweep's mixed: plans predicted within\n"
    "                   M x the best are near-ties, which go to fewer groups (default 0.1;\n"
    "                   0: the strict minimum)\n"
    "  --format F       table (default) or json\n"
    "  --svg FILE       also draw the predicted pipeline as an SVG Gantt chart (one block of\n"
    "                   compute / top-k / communication lanes per planner)\n";

struct Args {
  std::string model;
  std::string workers;
  std::string sweep;
  std::string density;
  std::string perf = "reference";
  std::string planner = "mgs";
  std::string threshold = "8192";
  std::string margin = "0.1";
  std::string format = "table";
  std::string svg;
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
    } else if (opt == "--planner") {
      a.planner = value();
    } else if (opt == "--threshold") {
      a.threshold = value();
    } else if (opt == "--choice-margin") {
      a.margin = value();
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
  return a;
}

// Seconds as fixed-point with 6 decimals; scientific from 1e6 s on, so that huge but
// finite times stay short.
std::string seconds(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e6 ? "%.6f" : "%.6e", v);
  return buf;
}

std::string ratio(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e9 ? "%.3f" : "%.3e", v);
  return buf;
}

using Row = std::vector<std::string>;

// Prints `count` rows (row(0) is the header) with every column as wide as its widest
// cell: numbers right-aligned, the last column (names) left-aligned and not padded. Two
// passes over row(i), so that a plan of a million groups is not held as text.
void print_table(std::ostream& os, std::size_t count, const std::function<Row(std::size_t)>& row) {
  std::vector<std::size_t> width;
  for (std::size_t i = 0; i < count; ++i) {
    const Row r = row(i);
    width.resize(std::max(width.size(), r.size()), 0);
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string line;
  for (std::size_t i = 0; i < count; ++i) {
    const Row r = row(i);
    line = " ";
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += ' ';
      if (c + 1 == r.size()) {
        line += r[c];
      } else {
        line += std::string(width[c] - r[c].size(), ' ') + r[c] + ' ';
      }
    }
    os << line << "\n";
  }
}

std::string group_label(const std::vector<omgs::LayerSpec>& layers, const omgs::Group& g) {
  std::string s = layers[g.end - 1].name;
  if (g.end - g.begin > 1) s += " .. " + layers[g.begin].name;
  return s;
}

void print_status(std::ostream& os, const omgs::Plan& plan) {
  if (plan.status != omgs::PlanStatus::complete)
    os << "  note: planner " << omgs::to_string(plan.planner) << " is "
       << omgs::to_string(plan.status) << ": " << plan.status_note << "\n";
}

void print_plan_table(std::ostream& os, const omgs::Plan& plan,
                      const std::vector<omgs::LayerSpec>& layers) {
  const omgs::Timeline& t = plan.predicted;
  os << "planner " << omgs::to_string(plan.planner) << ": " << plan.groups.size() << " groups ("
     << plan.dense_groups() << " dense), predicted iteration " << seconds(t.iteration_end_s)
     << " s (compute " << seconds(t.compute_end_s) << " s, communication not hidden "
     << seconds(t.non_overlapped_comm_s) << " s)\n";
  if (plan.planner == omgs::Planner::mixed)
    os << "  picked: " << omgs::to_string(plan.picked)
       << " (the candidate choose_plan kept: near-ties to fewer groups)\n";
  print_status(os, plan);
  print_table(os, plan.groups.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"group",      "layers",       "numel",      "collective",
              "topk_end_s", "comm_start_s", "comm_end_s", "first .. last (backward order)"};
    const std::size_t g = i - 1;
    const omgs::Group& gr = plan.groups[g];
    const omgs::GroupTiming& gt = t.groups[g];
    return {std::to_string(g),        std::to_string(gr.end - gr.begin),
            std::to_string(gr.numel), std::string(omgs::to_string(gr.collective)),
            seconds(gt.topk_end_s),   seconds(gt.comm_start_s),
            seconds(gt.comm_end_s),   group_label(layers, gr)};
  });
}

void print_comparison(std::ostream& os, const std::vector<omgs::Plan>& plans) {
  double layerwise = 0.0;
  for (const omgs::Plan& p : plans)
    if (p.planner == omgs::Planner::layerwise) layerwise = p.predicted.iteration_end_s;
  print_table(os, plans.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"planner",           "groups",       "iteration_s",          "compute_s",
              "not_hidden_comm_s", "comm_total_s", "speedup_vs_layerwise", "status"};
    const omgs::Plan& p = plans[i - 1];
    const omgs::Timeline& t = p.predicted;
    return {std::string(omgs::to_string(p.planner)),
            std::to_string(p.groups.size()),
            seconds(t.iteration_end_s),
            seconds(t.compute_end_s),
            seconds(t.non_overlapped_comm_s),
            seconds(t.comm_total_s),
            ratio(t.iteration_end_s > 0 ? layerwise / t.iteration_end_s : 1.0),
            std::string(omgs::to_string(p.status))};
  });
  for (const omgs::Plan& p : plans) print_status(os, p);
}

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) die("--svg: cannot open '" + path + "' for writing");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) die("--svg: writing '" + path + "' failed");
}

std::string collectives(const omgs::Plan& p) {
  return std::to_string(p.dense_groups()) + "/" + std::to_string(p.groups.size());
}

int run_sweep(const Args& args, const std::vector<omgs::LayerSpec>& layers,
              const omgs::PerfModel& model, const omgs::PlanConfig& config) {
  const double density = config.density;
  const std::vector<omgs::SweepRow> rows = omgs::sweep_workers(
      layers, model, density, omgs::parse_workers_list(args.sweep), {}, config.choice_margin);
  std::ostringstream title;
  title << args.model << ": density " << density << ", " << model.describe();
  if (!args.svg.empty()) write_file(args.svg, omgs::sweep_svg(rows, title.str()));
  if (args.format == "json") {
    std::cout << "{\"density\": " << density << ", \"sweep\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const omgs::SweepRow& r = rows[i];
      std::cout << (i ? ",\n" : "\n") << "{\"workers\": " << r.workers
                << ", \"dense_s\": " << seconds(r.dense.predicted.iteration_end_s)
                << ", \"mgs_s\": " << seconds(r.mgs.predicted.iteration_end_s)
                << ", \"optimal_s\": " << seconds(r.optimal.predicted.iteration_end_s)
                << ", \"mixed_s\": " << seconds(r.mixed.predicted.iteration_end_s)
                << ", \"mixed_picked\": \"" << omgs::to_string(r.mixed.picked)
                << "\", \"mixed_dense_groups\": " << r.mixed.dense_groups()
                << ", \"mixed_groups\": " << r.mixed.groups.size() << "}";
    }
    std::cout << "]}\n";
    return 0;
  }
  std::cout << title.str() << "\n\n";
  print_table(std::cout, rows.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"P",           "dense_s",        "mgs_s",        "optimal_s",
              "mixed_s",     "mixed_vs_dense", "mixed_vs_mgs", "mixed_dense/groups",
              "mixed_picked"};
    const omgs::SweepRow& r = rows[i - 1];
    const double mixed = r.mixed.predicted.iteration_end_s;
    return {std::to_string(r.workers),
            seconds(r.dense.predicted.iteration_end_s),
            seconds(r.mgs.predicted.iteration_end_s),
            seconds(r.optimal.predicted.iteration_end_s),
            seconds(mixed),
            ratio(mixed > 0 ? r.dense.predicted.iteration_end_s / mixed : 1.0),
            ratio(mixed > 0 ? r.mgs.predicted.iteration_end_s / mixed : 1.0),
            collectives(r.mixed),
            std::string(omgs::to_string(r.mixed.picked))};
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
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
    if (args.format != "table" && args.format != "json")
      die("--format '" + args.format + "' is not table or json", 2);

    if (!args.sweep.empty()) {
      const std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(args.model);
      return run_sweep(args, layers, *omgs::make_perf_model(args.perf), config);
    }
    std::vector<omgs::Planner> planners;
    const std::vector<omgs::LayerSpec> layers = omgs::load_model_csv(args.model);
    const std::unique_ptr<omgs::PerfModel> model = omgs::make_perf_model(args.perf);
    model->check_workers(config.workers);
    if (args.planner == "all") {
      planners = omgs::all_planners();
      if (model->knows_allreduce(config.workers))
        for (omgs::Planner p : omgs::choice_planners()) planners.push_back(p);
    } else
      planners.push_back(omgs::parse_planner(args.planner));

    std::vector<omgs::Plan> plans;
    for (omgs::Planner p : planners) plans.push_back(omgs::make_plan(p, layers, *model, config));

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
    } else {
      print_comparison(std::cout, plans);
    }
    return 0;
  } catch (const omgs::Error& e) {
    die(e.what());
  }
}
