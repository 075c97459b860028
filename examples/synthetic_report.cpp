#include "synthetic_report.hpp"

#include <algorithm>
#include <cstdio>

#include "median.hpp"
#include "synthetic_args.hpp"

namespace omgs_synthetic {

void Result::record(double iter, double wait, double sparsify, double sparsify_cpu,
                    double aggregate) {
  iters.push_back(iter);
  waits.push_back(wait);
  sparsifies.push_back(sparsify);
  sparsify_cpus.push_back(sparsify_cpu);
  aggregates.push_back(aggregate);
}

void Result::summarize() {
  if (iters.empty()) return;
  iteration_s = omgs_examples::median(iters);
  not_hidden_s = omgs_examples::median(waits);
  sparsify_s = omgs_examples::median(sparsifies);
  sparsify_cpu_s = omgs_examples::median(sparsify_cpus);
  aggregate_s = omgs_examples::median(aggregates);
}

void Result::record_wall(int it, int n, double wall) {
  if (it < n) walls.push_back(wall);
  if (it + 1 == n) {
    double sum = 0;
    for (double w : walls) sum += w;
    run_mean_s = sum / static_cast<double>(walls.size());
  }
}

std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  return buf;
}

void print_table(int iterations, int warmup, int loop_warmup, bool dense,
                 const std::vector<Result>& results) {
  const double dense_s = dense ? results[0].iteration_s : 0;
  int width = 12;
  for (const Result& r : results) width = std::max(width, static_cast<int>(r.method.size()));
  std::printf(
      "\n%d timed iterations each (after %d warm-up; NAME+loop: after %d more, its refit\n"
      "windows), slowest rank, medians; run_mean_s: the mean of the first %d iterations\n"
      "from the start (warm-up, the loop's exploration and refits included):\n",
      iterations, warmup, loop_warmup, warmup + iterations);
  std::printf(
      "  %-*s  groups  iteration_s  run_mean_s  not_hidden_comm_s  sparsify_s  sparsify_cpu_s  "
      "aggregate_s  sent/rank/iter  fabric/rank/iter  bytes/pair  predicted_s  speedup_vs_dense  "
      "notes\n",
      width, "method");
  for (const Result& r : results) {
    char pred[16] = "-", speed[16] = "-", per_pair[16] = "-";
    const std::string fabric = r.fabric_per_iter >= 0 ? bytes_text(r.fabric_per_iter) : "-";
    if (r.predicted_s >= 0) std::snprintf(pred, sizeof pred, "%.4f", r.predicted_s);
    if (dense_s > 0) std::snprintf(speed, sizeof speed, "%.2f", dense_s / r.iteration_s);
    if (r.pairs > 0) std::snprintf(per_pair, sizeof per_pair, "%.2f", r.bytes_per_pair());
    std::printf(
        "  %-*s  %6zu  %11.4f  %10.4f  %17.4f  %10.4f  %14.4f  %11.4f  %14s  %16s  %10s  %11s  "
        "%16s  %s\n",
        width, r.method.c_str(), r.groups, r.iteration_s, r.run_mean_s, r.not_hidden_s,
        r.sparsify_s, r.sparsify_cpu_s, r.aggregate_s, bytes_text(r.bytes_per_iter).c_str(),
        fabric.c_str(), per_pair, pred, speed, r.note.empty() ? "-" : r.note.c_str());
  }
}

namespace {

const Result* find(const std::vector<Result>& results, const Result& like, const std::string& wire,
                   int round) {
  for (const Result& r : results)
    if (r.planner == like.planner && r.exchange == like.exchange &&
        r.collectives == like.collectives && r.wire == wire && r.round == round)
      return &r;
  return nullptr;
}

struct Spread {
  double min = 0, median = 0, max = 0;
};

Spread spread_of(const std::vector<double>& v) {
  return {*std::min_element(v.begin(), v.end()), omgs_examples::median(v),
          *std::max_element(v.begin(), v.end())};
}

/// One planner's (and exchange's) rows of `wire` against those of `base`, round by round.
void print_pair(const std::vector<Result>& results, const Result& like, const std::string& base,
                const std::string& wire, int rounds) {
  std::vector<double> bytes, iters;
  std::string groups;
  for (int k = 0; k < rounds; ++k) {
    const Result* a = find(results, like, base, k);
    const Result* b = find(results, like, wire, k);
    if (a == nullptr || b == nullptr || a->bytes_per_iter <= 0 || a->iteration_s <= 0) continue;
    bytes.push_back(b->bytes_per_iter / a->bytes_per_iter);
    iters.push_back(b->iteration_s / a->iteration_s);
    groups +=
        (groups.empty() ? "" : ", ") + std::to_string(a->groups) + "/" + std::to_string(b->groups);
  }
  if (bytes.empty()) return;
  const Spread sb = spread_of(bytes), si = spread_of(iters);
  std::string who = like.exchange.empty() ? like.planner : like.planner + "/" + like.exchange;
  if (!like.collectives.empty()) who += "/" + like.collectives;
  std::printf("  %-12s %-7s bytes/iter x %.3f %.3f %.3f  iteration_s x %.3f %.3f %.3f  groups %s\n",
              who.c_str(), wire.c_str(), sb.min, sb.median, sb.max, si.min, si.median, si.max,
              groups.c_str());
}

/// One configuration's iteration times, a value per round.
struct Config {
  std::string name;
  std::vector<double> iters;
  bool is_default = false;
  std::string collectives;        // its --collectives item
  std::vector<std::string> used;  // the collectives its plan uses (its first round's)
  std::vector<double> fabric;     // bytes across the fabric per rank per iteration, per round
};

std::vector<Config> configs_of(const std::vector<Result>& results) {
  std::vector<Config> configs;
  for (const Result& r : results) {
    if (r.planner.empty() || r.iteration_s <= 0) continue;  // the dense baselines
    auto it = std::find_if(configs.begin(), configs.end(),
                           [&](const Config& c) { return c.name == r.config; });
    if (it == configs.end()) {
      configs.push_back({r.config, {}, r.planner == default_method, r.collectives, r.used, {}});
      it = configs.end() - 1;
    }
    it->iters.push_back(r.iteration_s);
    if (r.fabric_per_iter >= 0) it->fabric.push_back(r.fabric_per_iter);
  }
  return configs;
}

}  // namespace

void print_wire_comparison(const std::vector<std::string>& wires, int rounds,
                           const std::vector<Result>& results) {
  if (wires.size() < 2) return;
  std::printf(
      "\npair wires against %s, same planner, alternated in this run: ratios min / median / "
      "max over %d round(s); groups %s/wire per round\n",
      wires[0].c_str(), rounds, wires[0].c_str());
  std::vector<const Result*> seen;  // one per planner, exchange and set of collectives
  for (const Result& r : results) {
    if (r.planner.empty() || r.wire != wires[0] || r.round != 0) continue;
    seen.push_back(&r);
  }
  for (const Result* like : seen)
    for (std::size_t w = 1; w < wires.size(); ++w)
      print_pair(results, *like, wires[0], wires[w], rounds);
}

void print_collectives_comparison(const std::vector<std::string>& sets, int rounds,
                                  const std::vector<Result>& results) {
  if (sets.size() < 2) return;
  const std::vector<Config> configs = configs_of(results);
  std::vector<std::string> first_used;  // every collective a plan of the first set uses
  for (const Config& c : configs)
    if (c.collectives == sets[0]) first_used.insert(first_used.end(), c.used.begin(), c.used.end());
  auto new_collective = [&](const Config& c) {
    return std::any_of(c.used.begin(), c.used.end(), [&](const std::string& u) {
      return std::find(first_used.begin(), first_used.end(), u) == first_used.end();
    });
  };
  std::vector<const Config*> best(sets.size(), nullptr);
  for (std::size_t s = 0; s < sets.size(); ++s)
    for (const Config& c : configs)
      if (c.collectives == sets[s] && (s == 0 || new_collective(c)) &&
          (best[s] == nullptr ||
           omgs_examples::median(c.iters) < omgs_examples::median(best[s]->iters)))
        best[s] = &c;
  if (best[0] == nullptr) return;
  std::printf(
      "\nsets of collectives, the best row of each (after the first: of the rows whose plan uses "
      "a collective no row of %s uses), alternated over %d round(s) in this run: iteration_s "
      "min / median / max, fabric bytes per rank per iteration (median over the rounds), each "
      "against %s's best\n",
      sets[0].c_str(), rounds, sets[0].c_str());
  const Spread s0 = spread_of(best[0]->iters);
  const double f0 = best[0]->fabric.empty() ? -1 : omgs_examples::median(best[0]->fabric);
  for (std::size_t s = 0; s < sets.size(); ++s) {
    if (best[s] == nullptr) {
      std::printf("  %-18s none: no plan of this set uses a collective %s's plans do not\n",
                  sets[s].c_str(), sets[0].c_str());
      continue;
    }
    const Spread sp = spread_of(best[s]->iters);
    const double f = best[s]->fabric.empty() ? -1 : omgs_examples::median(best[s]->fabric);
    char ratio[32] = "-";
    if (f >= 0 && f0 > 0) std::snprintf(ratio, sizeof ratio, "x %.3f", f / f0);
    std::printf("  %-18s %-32s %8.4f %8.4f %8.4f  x %.3f  fabric %10s %s\n", sets[s].c_str(),
                best[s]->name.c_str(), sp.min, sp.median, sp.max, sp.median / s0.median,
                f >= 0 ? bytes_text(f).c_str() : "-", ratio);
  }
}

void print_config_comparison(int rounds, const std::vector<Result>& results) {
  const std::vector<Config> configs = configs_of(results);
  if (configs.size() < 2) return;
  std::size_t best = 0;
  std::vector<Spread> spreads;
  for (const Config& c : configs) spreads.push_back(spread_of(c.iters));
  for (std::size_t i = 1; i < configs.size(); ++i)
    if (spreads[i].median < spreads[best].median) best = i;
  std::printf(
      "\nconfigurations, alternated over %d round(s) in this run: iteration_s min / median / "
      "max, and the median against the best's (%s)\n",
      rounds, configs[best].name.c_str());
  for (std::size_t i = 0; i < configs.size(); ++i)
    std::printf("  %-28s %8.4f %8.4f %8.4f  x %.3f%s\n", configs[i].name.c_str(), spreads[i].min,
                spreads[i].median, spreads[i].max, spreads[i].median / spreads[best].median,
                i == best ? "  (best)" : "");
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i].is_default) continue;
    const double ratio = spreads[i].median / spreads[best].median;
    const bool inside = spreads[i].median <= spreads[best].max;
    std::printf(
        "default: x %.3f the best's median: %s (the best's rounds spread %.4f-%.4f s; the "
        "default's median %s it)\n",
        ratio, ratio <= 1.05 ? "within 5%" : "more than 5% behind", spreads[best].min,
        spreads[best].max, inside ? "inside" : "outside");
  }
}

}  // namespace omgs_synthetic
