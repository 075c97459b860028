// Node shapes and the model of the two-level collectives (<omgs/node_model.hpp>).
#include <omgs/node_model.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include <omgs/plan.hpp>

#include "json.hpp"

namespace omgs {

namespace {
bool bad(double v) {
  return !std::isfinite(v) || v < 0.0;
}

std::string show(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

double link_number(const detail::JsonValue& link, const char* key, const std::string& where) {
  const detail::JsonValue* v = link.find(key);
  if (v == nullptr) throw Error(where + ": missing member \"" + key + "\"");
  if (!v->is(detail::JsonValue::Kind::number))
    throw Error(where + ": member \"" + key + "\" must be a number, not a " +
                detail::json_kind_name(v->kind()));
  if (bad(v->number()))
    throw Error(where + ":" + std::to_string(v->line()) + ": " + key + " = " + show(v->number()) +
                " (must be finite and >= 0)");
  return v->number();
}

// One step of a ring inside the node: (G - 1) latencies and `bytes` received per rank.
double node_steps_s(const NodeShape& shape, double bytes) {
  const double others = static_cast<double>(shape.ranks_per_node) - 1.0;
  return others * shape.link.alpha_s + bytes * shape.link.beta_s_per_byte;
}
}  // namespace

AlphaBeta load_node_link(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("omgs: cannot open the fabric file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const detail::JsonValue doc = detail::parse_json(ss.str(), path);
  const detail::JsonValue* link =
      doc.is(detail::JsonValue::Kind::object) ? doc.find("node_link") : nullptr;
  if (link == nullptr)
    throw Error(path +
                ": no \"node_link\" member (the intra-node link a node shape needs: "
                "{\"alpha_s\": ..., \"beta_s_per_byte\": ...})");
  if (!link->is(detail::JsonValue::Kind::object))
    throw Error(path + ": member \"node_link\" must be an object");
  const std::string where = path + ": node_link";
  return {link_number(*link, "alpha_s", where), link_number(*link, "beta_s_per_byte", where)};
}

void check_node_shape(const NodeShape& shape, int workers) {
  const int g = shape.ranks_per_node;
  if (g < 1)
    throw Error("omgs: the node shape's ranks per node = " + std::to_string(g) + " (must be >= 1)");
  if (bad(shape.link.alpha_s) || bad(shape.link.beta_s_per_byte))
    throw Error("omgs: the node shape's link: alpha_s = " + show(shape.link.alpha_s) +
                ", beta_s_per_byte = " + show(shape.link.beta_s_per_byte) +
                " (must be finite and >= 0)");
  if (workers < 1 || workers % g != 0)
    throw Error("omgs: " + std::to_string(g) + " ranks per node do not divide P = " +
                std::to_string(workers) + " workers (the nodes must be whole and equal)");
}

NodeModel::NodeModel(AlphaBetaModel fabric, NodeShape shape)
    : fabric_(std::move(fabric)), shape_(shape) {
  check_node_shape(shape_, shape_.ranks_per_node);
}

double NodeModel::topk_s(std::uint64_t numel) const {
  return fabric_.topk_s(numel);
}
double NodeModel::allgather_s(std::uint64_t numel, int workers, double density) const {
  return fabric_.allgather_s(numel, workers, density);
}
void NodeModel::check_workers(int workers) const {
  fabric_.check_workers(workers);
}
bool NodeModel::knows_allreduce(int workers) const {
  return fabric_.knows_allreduce(workers);
}
double NodeModel::allreduce_s(std::uint64_t numel, int workers) const {
  return fabric_.allreduce_s(numel, workers);
}
bool NodeModel::knows_sparse_allreduce(int workers) const {
  return fabric_.knows_sparse_allreduce(workers);
}
double NodeModel::sparse_allreduce_s(std::uint64_t numel, int workers, double density) const {
  return fabric_.sparse_allreduce_s(numel, workers, density);
}

std::string NodeModel::describe() const {
  std::ostringstream os;
  os << fabric_.describe() << "; nodes of " << shape_.ranks_per_node << " ranks (link "
     << shape_.link.alpha_s << " s per step + " << shape_.link.beta_s_per_byte
     << "*bytes s; allreduce_node and sparse_node in two levels)";
  return os.str();
}

bool NodeModel::knows_collective(std::string_view name, int workers) const {
  const int g = shape_.ranks_per_node;
  const bool whole = workers >= 1 && workers % g == 0;
  if (name == "allreduce_node") return whole && fabric_.knows_allreduce(workers / g);
  if (name == "sparse_node") return whole && fabric_.knows_collective("allgather", workers / g);
  return fabric_.knows_collective(name, workers);
}

double NodeModel::collective_s(std::string_view name, std::uint64_t numel, int workers,
                               double density) const {
  if (name == "allreduce_node") return allreduce_node_s(numel, workers);
  if (name == "sparse_node") return sparse_node_s(numel, workers, density);
  return fabric_.collective_s(name, numel, workers, density);
}

double NodeModel::allreduce_node_s(std::uint64_t numel, int workers) const {
  check_node_shape(shape_, workers);
  const std::uint64_t g = static_cast<std::uint64_t>(shape_.ranks_per_node);
  const double others = static_cast<double>(g) - 1.0;
  const double bytes = others / static_cast<double>(g) * fabric_.allreduce_element_bytes() *
                       static_cast<double>(numel);
  const std::uint64_t shard = numel / g + (numel % g != 0);
  return 2.0 * node_steps_s(shape_, bytes) +
         fabric_.allreduce_s(shard, workers / shape_.ranks_per_node);
}

double NodeModel::sparse_node_s(std::uint64_t numel, int workers, double density) const {
  check_node_shape(shape_, workers);
  if (numel == 0) return 0.0;
  const std::uint64_t g = static_cast<std::uint64_t>(shape_.ranks_per_node);
  const int nodes = workers / shape_.ranks_per_node;
  const double others = static_cast<double>(g) - 1.0;
  const std::uint64_t shard = numel / g + (numel % g != 0);
  const double n = static_cast<double>(numel), s = static_cast<double>(shard);
  // The summed shard is shared as pairs or as floats, whichever is fewer bytes.
  const double pairs = static_cast<double>(nodes) *
                       static_cast<double>(selected_count(shard, density)) * fabric_.pair_bytes();
  const double share = std::min(pairs, 4.0 * s);
  return node_steps_s(shape_, others / static_cast<double>(g) * 4.0 * n) + fabric_.topk_s(shard) +
         fabric_.allgather_s(shard, nodes, density) + node_steps_s(shape_, others * share);
}

}  // namespace omgs
