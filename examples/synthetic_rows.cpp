#include "synthetic_rows.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>

namespace omgs_synthetic {

std::string Method::label(const Args& args, const std::string& sep, bool with_round) const {
  std::string s = planner;
  if (!exchange.empty() && args.sparse_exchanges.size() > 1) s += sep + exchange;
  if (!wire.empty()) s += sep + wire;
  if (!collectives.empty() && args.collectives.size() > 1) s += sep + collectives;
  if (with_round && args.rounds > 1)
    s += (sep == "/" ? "#" : sep + "r") + std::to_string(round + 1);
  return s;
}

std::vector<Method> methods_in_turn(const Args& args) {
  const std::vector<std::string> none{""};
  const std::vector<std::string>& wires = args.pair_wires.empty() ? none : args.pair_wires;
  const std::vector<std::string>& exchanges =
      args.sparse_exchanges.empty() ? none : args.sparse_exchanges;
  const std::vector<std::string>& sets = args.collectives.empty() ? none : args.collectives;
  std::vector<Method> methods;
  for (int round = 0; round < args.rounds; ++round)
    for (const std::string& p : args.planners) {
      if (p == default_method) {
        methods.push_back({p, "", "", "", round});
        continue;
      }
      const bool dense = p == "dense" || p == "dense+loop";  // no exchange, no pair wire
      for (const std::string& e : dense ? none : exchanges)
        for (const std::string& w : dense ? none : wires)
          for (const std::string& c : sets) methods.push_back({p, e, w, c, round});
    }
  return methods;
}

omgs::CollectiveSet row_collectives(const std::string& item, const std::string& exchange,
                                    int workers, const omgs::PerfModel& model) {
  if (item.empty() || item == "flat") return {};
  if (item != "node") {
    std::string list = item;
    std::replace(list.begin(), list.end(), '+', ',');
    return omgs::parse_collective_set(list);
  }
  omgs::PlanConfig config;
  config.workers = workers;
  config.sparse_exchange =
      exchange.empty() ? omgs::default_sparse_exchange : omgs::parse_sparse_exchange(exchange);
  omgs::CollectiveSet set = omgs::allowed_collectives(config);
  for (omgs::Collective c : {omgs::Collective::sparse_node, omgs::Collective::allreduce_node})
    if (model.knows_collective(omgs::to_string(c), workers)) set.insert(c);
  return set;
}

omgs::RuntimeOptions method_options(const Args& args, const Method& m, const std::string& perf,
                                    omgs::DenseAllreduce dense_form,
                                    const omgs::CollectiveSet& collectives) {
  omgs::RuntimeOptions opt;
  const bool is_default = m.planner == default_method;
  const bool loop = is_default || closed_loop(m.planner);
  if (!is_default) {
    opt.planner = omgs::parse_planner(loop ? m.planner.substr(0, m.planner.size() - 5) : m.planner);
    if (!m.wire.empty()) opt.pair_wire = omgs::parse_pair_wire(m.wire);
    if (!m.exchange.empty()) opt.sparse_exchange = omgs::parse_sparse_exchange(m.exchange);
    opt.collectives = collectives;
  }
  opt.dense_allreduce = dense_form;
  opt.density = args.density;
  opt.perf_model = perf;
  opt.ranks_per_node = args.ranks_per_node;
  opt.refit_iterations = loop ? args.refit : 0;  // the fixed planners: open loop
  if (!args.trace.empty()) opt.trace_path = args.trace + "." + m.label(args, ".") + ".%r.json";
  return opt;
}

std::string exchanges_text(const Args& args) {
  if (args.sparse_exchanges.empty())
    return std::string(omgs::to_string(omgs::RuntimeOptions().sparse_exchange)) +
           " (the runtime's)";
  std::string s;
  for (const std::string& e : args.sparse_exchanges) s += (s.empty() ? "" : ",") + e;
  return s;
}

std::string groups_by_collective(const omgs::Plan& plan) {
  std::map<int, std::size_t> count;
  for (const omgs::Group& g : plan.groups) ++count[static_cast<int>(g.collective)];
  std::string s;
  for (const auto& [id, n] : count)
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " +
         std::string(omgs::to_string(static_cast<omgs::Collective>(id)));
  return s;
}

void print_collectives(const Args& args, const omgs::PerfModel& model,
                       const omgs_examples::FabricCounter& fabric, int size, int rank) {
  if (rank != 0) return;
  for (const std::string& c : args.collectives) {
    const std::string exchange = args.sparse_exchanges.empty() ? "" : args.sparse_exchanges[0];
    const omgs::CollectiveSet set = omgs_synthetic::row_collectives(c, exchange, size, model);
    std::printf("collectives %s: %s\n", c.c_str(),
                set.empty() ? "the runtime's own" : omgs::to_string(set).c_str());
  }
  if (!args.collectives.empty() || args.ranks_per_node > 0)
    std::printf("ranks per node of the two-level rows: %s\n",
                args.ranks_per_node > 0 ? std::to_string(args.ranks_per_node).c_str()
                                        : "by shared memory (or OMGS_RANKS_PER_NODE)");
  std::printf("fabric bytes: %s\n\n",
              fabric.measurable()
                  ? ("the interface counters of the job's " + std::to_string(fabric.hosts()) +
                     " hosts over the timed iterations, per rank")
                        .c_str()
              : fabric.hosts() > 1
                  ? ("not measured (" + std::to_string(fabric.hosts()) +
                     " network namespaces, but a rank could not read its interface "
                     "counters)")
                        .c_str()
                  : "not measured (the job runs in one network namespace)");
}

}  // namespace omgs_synthetic
