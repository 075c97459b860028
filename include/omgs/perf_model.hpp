// Module plan, performance models: the costs MGS trades off (top-k selection, allgather,
// and the dense allreduce of mixed plans), the reference model of the OMGS-SGD code and
// the calibratable alpha-beta model with its JSON form. Included by <omgs/plan.hpp>.
// Pure C++17: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <omgs/export.hpp>

namespace omgs {

class AlphaBetaModel;
namespace detail {
struct LineKind;  // a registered collective (src/plan/collective_costs.hpp)
}

/// Predicts the two costs MGS trades off. numel is a (merged) group's element count.
class OMGS_EXPORT PerfModel {
 public:
  virtual ~PerfModel() = default;
  /// Seconds to select the top-k of numel elements on the device.
  virtual double topk_s(std::uint64_t numel) const = 0;
  /// Seconds to allgather the k = density * numel selected entries among `workers` ranks.
  virtual double allgather_s(std::uint64_t numel, int workers, double density) const = 0;
  /// Throws omgs::Error if this model cannot predict for `workers` ranks.
  virtual void check_workers(int workers) const = 0;
  /// One line describing the model (shown by omgs-plan and the runtime's report).
  virtual std::string describe() const = 0;
  /// Whether the model predicts the collective `name` among `workers` ranks: "allgather",
  /// "allreduce" (the dense allreduce), "sparse_allreduce" (Collective::sparse_allreduce),
  /// or another name registered with detail::register_line_bytes. The default answers for
  /// the three built-in names through the virtuals below (the allgather: where
  /// check_workers accepts P) and false for any other name.
  virtual bool knows_collective(std::string_view name, int workers) const;
  /// Seconds of the collective `name` for a group of numel elements, k = density * numel
  /// selected per rank (the dense allreduce ignores density), among `workers` ranks. Throws
  /// omgs::Error naming the model, the collective and P where it does not know it. The
  /// default calls the virtual below of the three built-in names.
  virtual double collective_s(std::string_view name, std::uint64_t numel, int workers,
                              double density) const;
  /// Whether the model predicts a dense allreduce among `workers` ranks. Models that do not
  /// (the default) never get dense groups from the planners: all-sparse plans, as before.
  virtual bool knows_allreduce(int /*workers*/) const { return false; }
  /// Seconds to allreduce (sum) the numel floats of a dense group among `workers` ranks.
  /// The default throws omgs::Error: the model does not know this cost.
  virtual double allreduce_s(std::uint64_t numel, int workers) const;
  /// Whether the model predicts the sparse allreduce (Collective::sparse_allreduce) among
  /// `workers` ranks. Models that do not (the default) never get such groups, whatever
  /// PlanConfig::sparse_exchange asks, except `allreduce`, which is then an error.
  virtual bool knows_sparse_allreduce(int /*workers*/) const { return false; }
  /// Seconds of the sparse allreduce of a group of numel elements, k = density * numel
  /// selected per rank, among `workers` ranks. The default throws omgs::Error.
  virtual double sparse_allreduce_s(std::uint64_t numel, int workers, double density) const;
  /// This model as an AlphaBetaModel (its coefficients; it can be saved as JSON), or
  /// nullptr (the default) for a model of another family.
  virtual const AlphaBetaModel* as_alpha_beta() const noexcept { return nullptr; }
};

/// The constants of the original OMGS-SGD code (a 16-GPU cluster), so that plans reproduce
/// the published ones:
///   topk_s(x)           = 0 if x == 0 else 2.18896957e-10 * x * log2(x)
///   allgather_s(x,P,d)  = 0 if x == 0 else (a + b * size) * 2,  size = x * P * 4 * d bytes,
/// with (a, b) from a table for P in {2, 4, 8, 16}, small (size < 1 MiB) or large messages.
/// Any other P is an error: the model only knows that cluster.
class OMGS_EXPORT ReferenceModel final : public PerfModel {
 public:
  double topk_s(std::uint64_t numel) const override;
  double allgather_s(std::uint64_t numel, int workers, double density) const override;
  void check_workers(int workers) const override;
  std::string describe() const override;
  /// The allgather at P in {2, 4, 8, 16}; no other collective.
  bool knows_collective(std::string_view name, int workers) const override;
};

/// How an AlphaBetaModel's top-k time grows with n.
enum class TopkForm {
  linear,  ///< c0 + c1 * n
  nlogn,   ///< c0 + c1 * n * log2(n)
};

/// A top-k cost alone, c0 + c1 * f(n): the "topk" member of a perf JSON document. A device's
/// selection cost does not depend on the network, so a GPU's model (examples/perf/
/// gpu_topk_*.json, a document of "type": "topk") can replace the top-k of any fabric's
/// model (AlphaBetaModel::with_topk, omgs-plan --topk).
struct TopkCost {
  TopkForm form = TopkForm::linear;
  double c0_s = 0.0;
  double c1_s = 0.0;
};

/// Reads the "topk" member of a perf JSON document: an alpha-beta model, or a top-k model
/// {"type": "topk", "topk": {...}} (other members are documentation). Throws omgs::Error
/// naming the file and the problem.
OMGS_EXPORT TopkCost load_topk_cost(const std::string& path);

/// Latency / inverse bandwidth of one allgather for a given number of workers.
struct AlphaBeta {
  double alpha_s = 0.0;          ///< start-up latency, seconds
  double beta_s_per_byte = 0.0;  ///< seconds per byte received
};

/// A collective's cost as a formula of P (for any number of workers), used where the
/// per-P table has no entry:
///   t(P, n) = alpha_s + alpha_log2p_s * log2(P) + alpha_p_s * (P - 1)
///             + beta_s_per_byte * wire_bytes(P, n),
/// where wire_bytes is what each rank moves in the textbook algorithms: for the allgather
/// (ring / Bruck) the (P - 1) * k * 8 bytes received from the other ranks, for the allreduce
/// (ring / Rabenseifner: reduce-scatter then allgather) 2 * (P - 1) / P * 4 * n bytes, for
/// the sparse allreduce AlphaBetaModel::sparse_allreduce_bytes.
struct CollectiveFormula {
  double alpha_s = 0.0;
  double alpha_log2p_s = 0.0;
  double alpha_p_s = 0.0;
  double beta_s_per_byte = 0.0;
};

/// One collective's costs (its line): a per-P alpha-beta table (exact P only) and an
/// optional formula for every other P. Table bytes: the allgather's P * k * 8 received
/// bytes, the allreduce's 4 * n gradient bytes, the sparse allreduce's wire bytes
/// (sparse_allreduce_bytes); a registered collective's are its own.
struct CollectiveCosts {
  std::map<int, AlphaBeta> table;
  bool has_formula = false;
  CollectiveFormula formula;
  /// A formula covers every P >= 1, never P <= 0.
  bool knows(int workers) const {
    return workers >= 1 && (has_formula || table.count(workers) != 0);
  }
  /// No table entry and no formula.
  bool empty() const { return table.empty() && !has_formula; }
};

/// A calibratable model: top-k time c0 + c1 * f(n) and one line (CollectiveCosts) per
/// collective by name: the allgather's always, alpha + beta * bytes, where bytes = P * k * 8
/// is what each rank really receives (k (uint32 index, float value) pairs from each of P
/// ranks), optionally the dense allreduce's ("allreduce"), the sparse allreduce's
/// ("sparse_allreduce") and those of collectives registered with detail::register_line_bytes.
/// Saved and loaded as a small JSON document:
///   {"type": "alpha_beta",
///    "topk": {"form": "linear" | "nlogn", "c0_s": 0.0, "c1_s": 1e-9},
///    "allgather": [{"workers": 4, "alpha_s": 1e-5, "beta_s_per_byte": 1e-10}, ...]}
/// with the optional members "<name>" (a table, like "allgather") and "<name>_formula" of
/// each other line (docs/planner.md).
class OMGS_EXPORT AlphaBetaModel final : public PerfModel {
 public:
  AlphaBetaModel(TopkForm form, double c0_s, double c1_s, std::map<int, AlphaBeta> allgather);
  /// The general form: allgather and (optionally: empty costs) allreduce, each a per-P
  /// table and/or a formula of P. JSON members "allgather" (may be [] with a formula),
  /// "allgather_formula", "allreduce" and "allreduce_formula" (docs/planner.md).
  AlphaBetaModel(TopkForm form, double c0_s, double c1_s, CollectiveCosts allgather,
                 CollectiveCosts allreduce);

  /// A model of the given lines by collective name (each registered, checked as with_line;
  /// the allgather's present, as every alpha-beta model has it). Throws omgs::Error as the
  /// constructors and with_line do.
  static AlphaBetaModel from_lines(TopkForm form, double c0_s, double c1_s,
                                   std::map<std::string, CollectiveCosts, std::less<>> lines);
  /// Whether every alpha-beta model must have the line `name` (the allgather's).
  static bool requires_line(std::string_view name) { return name == "allgather"; }

  /// Parses the JSON form; `source` names the document in error messages.
  static AlphaBetaModel from_json(std::string_view text, const std::string& source = "<json>");
  static AlphaBetaModel load(const std::string& path);
  std::string to_json() const;
  void save(const std::string& path) const;

  /// Bytes each rank receives in the allgather of a group of numel elements.
  static double bytes_received(std::uint64_t numel, int workers, double density);
  /// Bytes each rank moves in the sparse allreduce (detail::SparseAllreduce) of a group:
  ///   (P - 1) / P * 2 k pair_bytes + ceil(log2 P) * 16392,
  /// its k pairs sent to their regions' owners and about k reduced survivors sent back by
  /// their owners (2 k pairs of pair_bytes: 8 for the 8-byte pairs, the compact format's
  /// bytes per pair for RuntimeOptions::pair_wire), and the histogram round by recursive
  /// doubling (each step the coarse and the seeded fine histogram, 2 x 8 KiB, and an error
  /// slot). The counts are the messages' sizes; a threshold that leaves the seeded bin adds
  /// a second round of 8 KiB steps, which the model leaves out (training's drifts slowly).
  static double sparse_allreduce_bytes(std::uint64_t numel, int workers, double density,
                                       double pair_bytes = 8.0);

  double topk_s(std::uint64_t numel) const override;
  void check_workers(int workers) const override;
  std::string describe() const override;
  const AlphaBetaModel* as_alpha_beta() const noexcept override { return this; }
  /// Where the line of that name (the one it is predicted with: for the sparse allreduce
  /// completed by the derived formula, sparse_allreduce_effective_costs) knows P.
  bool knows_collective(std::string_view name, int workers) const override;
  /// The line's table entry for P, else its formula; 0 for numel == 0 for a registered
  /// name. Throws omgs::Error naming the model, the collective and P where the line does
  /// not know P, or the name is not a registered collective.
  double collective_s(std::string_view name, std::uint64_t numel, int workers,
                      double density) const override;
  /// The virtuals of the built-in collectives: collective_s and knows_collective of
  /// "allgather", "allreduce" and "sparse_allreduce".
  double allgather_s(std::uint64_t numel, int workers, double density) const override;
  bool knows_allreduce(int workers) const override;
  double allreduce_s(std::uint64_t numel, int workers) const override;
  bool knows_sparse_allreduce(int workers) const override;
  double sparse_allreduce_s(std::uint64_t numel, int workers, double density) const override;

  /// The lines as given (JSON, the constructors, with_line) by collective name.
  const std::map<std::string, CollectiveCosts, std::less<>>& lines() const { return lines_; }
  /// The line of the collective `name` as given (JSON, the constructors, with_line), nullptr
  /// if the model has none (the sparse allreduce's derived formula is not a given line).
  const CollectiveCosts* line(std::string_view name) const;
  /// The line of `name` as it predicts for P workers (the derived formula included): its
  /// table's entry for P, else its formula's alpha terms summed at P with its beta; nullopt
  /// where it does not know P or there is no such line.
  std::optional<AlphaBeta> line_at(std::string_view name, int workers) const;
  /// This model with the line of the collective `name` replaced by `costs` (empty costs:
  /// removed, but for the allgather's, which a model must have). Throws omgs::Error for a
  /// name not registered (detail::register_line_bytes) or costs its JSON would refuse.
  AlphaBetaModel with_line(std::string name, CollectiveCosts costs) const;

  /// This model with another top-k cost (same collectives).
  AlphaBetaModel with_topk(const TopkCost& topk) const;
  /// This model with the dense allreduce sending `bytes` per gradient element (4: fp32, the
  /// default; 2: bf16, as a bf16 training code or PyTorch's bf16 compression hook sends).
  /// The JSON member "allreduce_element_bytes" sets it too. Throws unless 0 < bytes <= 8.
  AlphaBetaModel with_allreduce_element_bytes(double bytes) const;
  double allreduce_element_bytes() const { return allreduce_element_bytes_; }

  /// with_line("sparse_allreduce", costs): the JSON members "sparse_allreduce" and
  /// "sparse_allreduce_formula". Throws omgs::Error on a negative or non-finite coefficient.
  AlphaBetaModel with_sparse_allreduce(CollectiveCosts costs) const;

  /// The given lines of the built-in collectives (empty costs where there is none).
  const CollectiveCosts& allgather_costs() const;
  const CollectiveCosts& allreduce_costs() const;
  const CollectiveCosts& sparse_allreduce_costs() const;
  /// The costs it is predicted with: the given ones, completed (when they have no formula)
  /// by the formula derived from the allgather and allreduce formulas when both exist
  /// (docs/planner.md, "The third exchange"):
  ///   alpha_s       = 2 allreduce.alpha_s + 2 allgather.alpha_s
  ///   alpha_log2p_s = 2 allreduce.alpha_log2p_s + 2 allgather.alpha_log2p_s
  ///   alpha_p_s     = 2 allgather.alpha_p_s + allgather.alpha_log2p_s
  ///   beta          = max(allgather.beta, allreduce.beta)
  /// (two histogram allreduces, the counts' and the survivors' allgathers; the counts'
  /// alltoall and the pairs' exchange with each of the P - 1 peers, one step latency each).
  const CollectiveCosts& sparse_allreduce_effective_costs() const;

  TopkForm topk_form() const { return form_; }
  double topk_c0_s() const { return c0_s_; }
  double topk_c1_s() const { return c1_s_; }
  const std::map<int, AlphaBeta>& allgather_table() const { return allgather_costs().table; }

  /// This model with the sparse exchanges (allgather and sparse allreduce) moving `bytes` per
  /// pair instead of 8 (the compact pair format's, RuntimeOptions::pair_wire; the fitted
  /// beta stays per byte). Not saved in the JSON. Throws unless 0 < bytes <= 64.
  AlphaBetaModel with_pair_bytes(double bytes) const;
  double pair_bytes() const noexcept { return pair_bytes_; }

 private:
  /// A line as predicted: its costs and the registered collective (its bytes).
  struct Line {
    CollectiveCosts costs;
    const detail::LineKind* kind = nullptr;
  };
  using Lines = std::map<std::string, CollectiveCosts, std::less<>>;

  TopkForm form_;
  double c0_s_;
  double c1_s_;
  Lines lines_;                                         // as given, never an empty one
  std::map<std::string, Line, std::less<>> effective_;  // lines_, completed by derivation
  double allreduce_element_bytes_ = 4.0;
  double pair_bytes_ = 8.0;

  /// Throws unless the lines are valid (the allgather's present, coefficients checked),
  /// then derives effective_.
  void check_and_derive();
  /// effective_ from lines_: the sparse allreduce's completed by the derived formula.
  void derive();
  [[noreturn]] void throw_unknown(std::string_view name, int workers) const;
};

/// "reference" gives a ReferenceModel; anything else is read as an AlphaBetaModel JSON file.
OMGS_EXPORT std::unique_ptr<PerfModel> make_perf_model(const std::string& spec);

}  // namespace omgs
