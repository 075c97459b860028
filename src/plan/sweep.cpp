// Predicted plans over many numbers of workers, the worker list syntax, and the log-log
// SVG chart of the crossover between dense and sparse (omgs-plan --workers-sweep).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <omgs/node_model.hpp>
#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

#include "plan/collective_table.hpp"
#include "svg_text.hpp"

namespace omgs {

namespace {
// The models of one sweep: omgs' own (the model's bytes per dense element) and the dense fp32
// and bf16 baselines' (nullptr: not an alpha-beta model, no bf16). With a node shape each is
// a NodeModel of the same fabric, which knows the two-level rows; without, the flat ones.
struct SweepModels {
  const PerfModel* own = nullptr;
  const PerfModel* fp32 = nullptr;
  const PerfModel* bf16 = nullptr;
  std::vector<std::unique_ptr<PerfModel>> owned;
};

SweepModels sweep_models(const PerfModel& model, const NodeShape& node) {
  SweepModels m;
  m.own = m.fp32 = &model;
  const bool two_level = node.ranks_per_node != 1;
  const AlphaBetaModel* ab = model.as_alpha_beta();
  if (ab == nullptr) {
    if (two_level)
      throw Error("omgs: a node shape needs an alpha-beta model of the fabric (" +
                  model.describe() + ")");
    return m;
  }
  auto keep = [&](AlphaBetaModel a) -> const PerfModel* {
    if (two_level)
      m.owned.push_back(std::make_unique<NodeModel>(std::move(a), node));
    else
      m.owned.push_back(std::make_unique<AlphaBetaModel>(std::move(a)));
    return m.owned.back().get();
  };
  if (two_level) m.own = keep(*ab);
  // The baselines: the same fabric sending 4 (fp32) and 2 (bf16) bytes per element in the
  // dense allreduce. omgs' own plans use the model's bytes (the form in force).
  m.fp32 = keep(ab->with_allreduce_element_bytes(4.0));
  m.bf16 = keep(ab->with_allreduce_element_bytes(2.0));
  return m;
}

// The configs of one P: omgs' own plans may use every allowed row and, with a node shape,
// the two two-level ones; the dense baselines are the flat and two-level dense allreduces
// (each group the faster: what NCCL does on nodes); the all-node-summed plan its row alone.
struct SweepConfigs {
  PlanConfig allgather, own, dense, node;
};

SweepConfigs sweep_configs(int p, double density, double margin, SparseExchange exchange,
                           std::uint64_t memory_budget_bytes, std::uint64_t max_mpi_count,
                           std::uint64_t max_group_numel, bool two_level) {
  SweepConfigs c;
  c.allgather = PlanConfig{p, density, 8192, margin, SparseExchange::allgather};
  c.allgather.memory_budget_bytes = memory_budget_bytes;
  c.allgather.max_mpi_count = max_mpi_count;
  c.allgather.max_group_numel = max_group_numel;
  c.own = c.allgather;
  c.own.sparse_exchange = exchange;
  c.dense = c.node = c.own;
  if (two_level) {
    c.own.collectives = allowed_collectives(c.own);
    c.own.collectives.insert(Collective::allreduce_node);
    c.own.collectives.insert(Collective::sparse_node);
    c.dense.collectives = {Collective::dense, Collective::allreduce_node};
    c.node.collectives = {Collective::sparse_node};
  }
  return c;
}
}  // namespace

std::vector<SweepRow> sweep_workers(const std::vector<LayerSpec>& layers, const PerfModel& model,
                                    double density, const std::vector<int>& workers,
                                    const OptimalBudget& budget, double margin,
                                    SparseExchange exchange, std::uint64_t memory_budget_bytes,
                                    std::uint64_t max_mpi_count, const NodeShape& node,
                                    std::uint64_t max_group_numel) {
  validate_choice_margin(margin);
  const bool two_level = node.ranks_per_node != 1;
  if (two_level)
    for (int p : workers) check_node_shape(node, p);
  double backward = 0.0;
  for (const LayerSpec& l : layers) backward += l.backward_s;
  const SweepModels m = sweep_models(model, node);
  const PerfModel& own = *m.own;
  const AlphaBetaModel* ab = model.as_alpha_beta();
  const bool own_dense_fp32 = ab == nullptr || ab->allreduce_element_bytes() == 4.0;
  std::vector<SweepRow> rows;
  for (int p : workers) {
    const SweepConfigs c = sweep_configs(p, density, margin, exchange, memory_budget_bytes,
                                         max_mpi_count, max_group_numel, two_level);
    own.check_workers(p);
    if (!own.knows_allreduce(p)) own.allreduce_s(1, p);  // throws, naming P
    SweepRow r;
    r.workers = p;
    r.ranks_per_node = node.ranks_per_node;
    r.backward_s = backward;
    r.mgs = make_plan(Planner::mgs, layers, own, c.allgather, budget);
    r.dense = make_plan(Planner::dense, layers, *m.fp32, c.dense, budget);
    r.optimal = make_plan(Planner::optimal, layers, own, c.own, budget);
    if (own.knows_sparse_allreduce(p) || exchange == SparseExchange::allreduce) {
      PlanConfig sar = c.allgather;
      sar.sparse_exchange = SparseExchange::allreduce;
      r.sparse_allreduce = make_plan(Planner::mgs, layers, own, sar, budget);
      r.has_sparse_allreduce = true;
    }
    // make_plan(Planner::mixed)'s candidates, without planning them twice; with another
    // exchange than the allgather, the two all-sparse baselines too.
    std::vector<Plan> candidates = {
        exchange == SparseExchange::allgather ? r.mgs : make_plan(Planner::mgs, layers, own, c.own),
        make_plan(Planner::mgs_mixed, layers, own, c.own, budget), r.optimal,
        own_dense_fp32 ? r.dense : make_plan(Planner::dense, layers, own, c.dense, budget)};
    if (exchange != SparseExchange::allgather) {
      candidates.push_back(r.mgs);
      if (r.has_sparse_allreduce) candidates.push_back(r.sparse_allreduce);
    }
    detail::drop_unserved(candidates, layers, c.own);  // no limits: keeps them all
    r.mixed = best_of(std::move(candidates), margin);
    if (two_level) {  // the best grouping on the node-summed row alone (no top-k row)
      r.sparse_node = make_plan(Planner::dense, layers, own, c.node, budget);
      r.has_sparse_node = true;
    }
    if (m.bf16 != nullptr) {
      r.dense_bf16 = make_plan(Planner::dense, layers, *m.bf16, c.dense, budget);
      r.has_bf16 = true;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {
long long parse_positive(const std::string& item, std::string_view text) {
  if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
    throw Error("omgs: workers list '" + std::string(text) + "': '" + item +
                "' is not a positive integer");
  errno = 0;
  const long long v = std::strtoll(item.c_str(), nullptr, 10);
  if (errno == ERANGE || v < 1 || v > (1 << 24))
    throw Error("omgs: workers list '" + std::string(text) + "': " + item +
                " is outside 1 .. 16777216");
  return v;
}
}  // namespace

std::vector<int> parse_workers_list(std::string_view text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in{std::string(text)};
  while (std::getline(in, item, ',')) items.push_back(item);
  if (items.empty()) throw Error("omgs: the workers list is empty");
  std::vector<int> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i] != "...") {
      out.push_back(static_cast<int>(parse_positive(items[i], text)));
      continue;
    }
    if (out.size() < 2 || i + 1 >= items.size() || items[i + 1] == "...")
      throw Error("omgs: workers list '" + std::string(text) +
                  "': '...' needs two numbers before it and one after it");
    const long long a = out[out.size() - 2], b = out.back();
    const long long last = parse_positive(items[i + 1], text);
    const bool geometric = b > a && b % a == 0;
    if (b <= a || last < b)
      throw Error("omgs: workers list '" + std::string(text) + "': '...' needs rising numbers");
    for (long long v = geometric ? b * (b / a) : b + (b - a); v < last;
         v = geometric ? v * (b / a) : v + (b - a))
      out.push_back(static_cast<int>(v));
  }
  return out;
}

namespace {
// The chart's lines.
struct Series {
  const char* name;
  const char* color;
  const char* dash;
  // A function, not a pointer to member (nvcc's rewrite of it makes g++ warn). NaN: no point.
  double (*time)(const SweepRow&);
};
const Series series[] = {
    {"dense fp32", "#d62728", "",
     [](const SweepRow& r) { return r.dense.predicted.iteration_end_s; }},
    {"dense bf16", "#ff7f0e", " stroke-dasharray=\"2,2\"",
     [](const SweepRow& r) { return r.has_bf16 ? r.dense_bf16.predicted.iteration_end_s : NAN; }},
    {"mgs (all allgather)", "#1f77b4", "",
     [](const SweepRow& r) { return r.mgs.predicted.iteration_end_s; }},
    {"sparse allreduce", "#9467bd", " stroke-dasharray=\"4,2\"",
     [](const SweepRow& r) {
       return r.has_sparse_allreduce ? r.sparse_allreduce.predicted.iteration_end_s : NAN;
     }},
    {"sparse node-summed", "#17becf", " stroke-dasharray=\"4,2\"",
     [](const SweepRow& r) {
       return r.has_sparse_node ? r.sparse_node.predicted.iteration_end_s : NAN;
     }},
    {"optimal", "#2ca02c", "",
     [](const SweepRow& r) { return r.optimal.predicted.iteration_end_s; }},
    {"mixed", "#000000", " stroke-dasharray=\"6,3\"",
     [](const SweepRow& r) { return r.mixed.predicted.iteration_end_s; }},
    {"backward pass", "#999999", " stroke-dasharray=\"1,4\"",
     [](const SweepRow& r) { return r.backward_s; }}};
}  // namespace

std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& title) {
  using detail::fmt;
  const double left = 90, right = 170, top = 50, bottom = 50, width = 900, height = 520;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double tmin = HUGE_VAL, tmax = 0, pmin = HUGE_VAL, pmax = 0;
  for (const SweepRow& r : rows) {
    pmin = std::min(pmin, double(r.workers));
    pmax = std::max(pmax, double(r.workers));
    for (const Series& s : series) {
      const double t = s.time(r);
      if (t > 0 && std::isfinite(t)) tmin = std::min(tmin, t), tmax = std::max(tmax, t);
    }
  }
  if (!(tmax > 0)) tmin = 1e-3, tmax = 1e-2;
  const double y0 = std::floor(std::log10(tmin)),
               y1 = std::max(y0 + 1, std::ceil(std::log10(tmax)));
  const double x0 = rows.empty() ? 0 : std::log2(pmin);
  const double x1 = std::max(x0 + 1, rows.empty() ? 1 : std::log2(pmax));
  auto X = [&](double p) { return left + (std::log2(p) - x0) / (x1 - x0) * plot_w; };
  auto Y = [&](double t) { return top + plot_h - (std::log10(t) - y0) / (y1 - y0) * plot_h; };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\""
    << fmt(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << fmt(left) << "\" y=\"22\" font-size=\"13\" font-weight=\"bold\">"
    << detail::xml_escape(title) << "</text>\n";
  for (double d = y0; d <= y1; d += 1) {  // decades of seconds
    const double y = Y(std::pow(10.0, d));
    o << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(y) << "\" x2=\"" << fmt(left + plot_w)
      << "\" y2=\"" << fmt(y) << "\" stroke=\"#ddd\"/>\n<text x=\"" << fmt(left - 6) << "\" y=\""
      << fmt(y + 4) << "\" text-anchor=\"end\">1e" << int(d) << " s</text>\n";
  }
  for (const SweepRow& r : rows) {
    const double x = X(r.workers);
    o << "<line x1=\"" << fmt(x) << "\" y1=\"" << fmt(top) << "\" x2=\"" << fmt(x) << "\" y2=\""
      << fmt(top + plot_h) << "\" stroke=\"#eee\"/>\n<text x=\"" << fmt(x) << "\" y=\""
      << fmt(top + plot_h + 16) << "\" text-anchor=\"middle\">" << r.workers << "</text>\n";
  }
  o << "<text x=\"" << fmt(left + plot_w / 2) << "\" y=\"" << fmt(height - 12)
    << "\" text-anchor=\"middle\">workers P (log scale)</text>\n";
  int shown = 0;  // legend rows: series without a point (no bf16 model) are left out
  for (const Series& s : series) {
    std::string points;
    for (const SweepRow& r : rows) {
      const double t = s.time(r);
      if (t > 0 && std::isfinite(t)) points += fmt(X(r.workers)) + "," + fmt(Y(t)) + " ";
    }
    if (points.empty()) continue;
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\"" << s.dash
      << " points=\"" << points << "\"><title>" << s.name << "</title></polyline>\n";
    const double ly = top + 14 + 18 * double(shown++);
    o << "<line x1=\"" << fmt(left + plot_w + 12) << "\" y1=\"" << fmt(ly) << "\" x2=\""
      << fmt(left + plot_w + 36) << "\" y2=\"" << fmt(ly) << "\" stroke=\"" << s.color
      << "\" stroke-width=\"2\"" << s.dash << "/>\n<text x=\"" << fmt(left + plot_w + 42)
      << "\" y=\"" << fmt(ly + 4) << "\">" << s.name << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace omgs
