// One calibration for every plan of an example job (see shared_calibration.hpp).
#include "shared_calibration.hpp"
#include "bounded_mpi.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace omgs_examples {

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double e = std::floor(std::log10(std::fabs(v))) - (digits - 1);
  const double scale = std::pow(10.0, e);
  return std::round(v / scale) * scale;
}

Spread spread_of(std::vector<double> v) {
  if (v.empty()) throw omgs::Error("spread_of: no values");
  std::sort(v.begin(), v.end());
  return {v.front(), v[(v.size() - 1) / 2], v.back()};
}

SharedModel calibrate_shared(MPI_Comm comm, const std::vector<omgs::LayerSpec>& layers,
                             double density, int repeats, int digits, omgs::SparseExchange exchange,
                             bool node_lines, int ranks_per_node) {
  if (repeats < 1) throw omgs::Error("calibrate_shared: repeats must be at least 1");
  const auto t0 = std::chrono::steady_clock::now();
  int size = 1;
  MPI_Comm_size(comm, &size);
  omgs::RuntimeOptions opt;
  opt.density = density;
  opt.planner = omgs::Planner::layerwise;
  opt.perf_model = "calibrate";
  // Every collective by name, not sparse_exchange = allreduce: the calibration runtime's
  // layer-wise plan need not make a sparse allreduce per layer to have the exchange timed;
  // and not automatic, which leaves the sparse allreduce out at two ranks.
  const bool sar = exchange != omgs::SparseExchange::allgather;
  if (sar)
    opt.collectives = {omgs::Collective::sparse, omgs::Collective::sparse_allreduce,
                       omgs::Collective::dense};
  else
    opt.sparse_exchange = omgs::SparseExchange::allgather;
  if (node_lines) {  // allowed, so timed (calibration_lines.cpp); on the rows' node shape
    if (!sar) opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense};
    opt.collectives.insert(omgs::Collective::sparse_node);
    opt.collectives.insert(omgs::Collective::allreduce_node);
  }
  opt.ranks_per_node = ranks_per_node;
  std::vector<Coefficients> runs;
  omgs::AllreduceFormChoice form;
  for (int r = 0; r < repeats; ++r) {
    omgs::Runtime rt(comm, layers, opt);
    if (r == 0) {
      form = rt.calibration().dense_allreduce;
      opt.dense_allreduce = form.form == omgs::AllreduceForm::blocking
                                ? omgs::DenseAllreduce::blocking
                                : omgs::DenseAllreduce::nonblocking;
    }
    const omgs::AlphaBetaModel* ab = rt.perf_model().as_alpha_beta();
    if (ab == nullptr || ab->allgather_table().count(size) == 0)
      throw omgs::Error("calibrate_shared: the runtime's calibration is not an alpha-beta model");
    const omgs::AlphaBeta& g = ab->allgather_table().at(size);
    const omgs::AlphaBeta ar = ab->allreduce_costs().table.count(size) != 0
                                   ? ab->allreduce_costs().table.at(size)
                                   : omgs::AlphaBeta{};
    const auto& st = ab->sparse_allreduce_costs().table;
    const omgs::AlphaBeta sa = st.count(size) != 0 ? st.at(size) : omgs::AlphaBeta{};
    if (sar && st.count(size) == 0)
      throw omgs::Error("calibrate_shared: the runtime's calibration has no sparse allreduce cost");
    auto node_line = [&](const char* name) {
      const omgs::CollectiveCosts* l = ab->line(name);
      if (!node_lines) return omgs::AlphaBeta{};
      if (l == nullptr || l->table.count(size) == 0)
        throw omgs::Error(std::string("calibrate_shared: the runtime's calibration has no ") +
                          name + " cost");
      return l->table.at(size);
    };
    const omgs::AlphaBeta no = node_line("sparse_node"), an = node_line("allreduce_node");
    runs.push_back({ab->topk_c0_s(), ab->topk_c1_s(), g.alpha_s, g.beta_s_per_byte, ar.alpha_s,
                    ar.beta_s_per_byte, sa.alpha_s, sa.beta_s_per_byte, no.alpha_s,
                    no.beta_s_per_byte, an.alpha_s, an.beta_s_per_byte});
  }
  auto field = [&](double Coefficients::*f) {
    std::vector<double> v;
    for (const Coefficients& c : runs) v.push_back(c.*f);
    return spread_of(v);
  };
  const Spread c0 = field(&Coefficients::c0), c1 = field(&Coefficients::c1);
  const Spread alpha = field(&Coefficients::alpha), beta = field(&Coefficients::beta);
  // Every rank holds the same values (the runtime takes the maximum over ranks); rank 0's
  // are broadcast anyway so that the model is identical to the bit.
  const Spread ar_alpha = field(&Coefficients::ar_alpha), ar_beta = field(&Coefficients::ar_beta);
  const Spread sar_alpha = field(&Coefficients::sar_alpha),
               sar_beta = field(&Coefficients::sar_beta);
  const Spread node_alpha = field(&Coefficients::node_alpha),
               node_beta = field(&Coefficients::node_beta);
  const Spread arn_alpha = field(&Coefficients::arn_alpha),
               arn_beta = field(&Coefficients::arn_beta);
  double m[12] = {
      round_significant(c0.median, digits),         round_significant(c1.median, digits),
      round_significant(alpha.median, digits),      round_significant(beta.median, digits),
      round_significant(ar_alpha.median, digits),   round_significant(ar_beta.median, digits),
      round_significant(sar_alpha.median, digits),  round_significant(sar_beta.median, digits),
      round_significant(node_alpha.median, digits), round_significant(node_beta.median, digits),
      round_significant(arn_alpha.median, digits),  round_significant(arn_beta.median, digits)};
  bcast_or_abort(m, 12, MPI_DOUBLE, 0, comm, "the calibrated model's broadcast");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  omgs::AlphaBetaModel model(omgs::TopkForm::linear, m[0], m[1],
                             omgs::CollectiveCosts{{{size, {m[2], m[3]}}}, false, {}},
                             omgs::CollectiveCosts{{{size, {m[4], m[5]}}}, false, {}});
  if (sar)
    model = model.with_sparse_allreduce(omgs::CollectiveCosts{{{size, {m[6], m[7]}}}, false, {}});
  if (node_lines) {
    model =
        model.with_line("sparse_node", omgs::CollectiveCosts{{{size, {m[8], m[9]}}}, false, {}});
    model = model.with_line("allreduce_node",
                            omgs::CollectiveCosts{{{size, {m[10], m[11]}}}, false, {}});
  }
  return {std::move(model), runs,     c0,         c1,        alpha,     beta,     ar_alpha, ar_beta,
          sar_alpha,        sar_beta, node_alpha, node_beta, arn_alpha, arn_beta, seconds,  form};
}

std::string write_job_model(MPI_Comm comm, const omgs::AlphaBetaModel& model) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  char name[4096] = {0};
  std::string err;
  if (rank == 0) {
    const char* dir = std::getenv("TMPDIR");
    std::string path = std::string(dir && *dir ? dir : "/tmp") + "/omgs-perf-XXXXXX";
    const int fd = mkstemp(path.data());
    if (fd < 0 || path.size() >= sizeof name) {
      err = "cannot create a temporary model file like '" + path + "'";
    } else {
      close(fd);
      model.save(path);
      std::snprintf(name, sizeof name, "%s", path.c_str());
    }
  }
  bcast_or_abort(name, sizeof name, MPI_CHAR, 0, comm, "the model file name's broadcast");
  if (name[0] == '\0') throw omgs::Error(rank == 0 ? err : "rank 0 could not write the model");
  barrier_or_abort(comm, "the model file's barrier");  // rank 0's file is complete
  // Where rank 0's file is not visible (no shared file system), this rank writes its own copy.
  const std::string text = model.to_json();
  std::ifstream in(name, std::ios::binary);
  std::ostringstream have;
  if (in) have << in.rdbuf();
  if (rank != 0 && have.str() != text) model.save(name);
  barrier_or_abort(comm, "the model file's barrier");
  return name;
}

void remove_job_model(MPI_Comm comm, const std::string& path) {
  barrier_or_abort(comm, "the model file's barrier");  // every rank is done with it
  std::remove(path.c_str());  // on a shared file system only the first succeeds
}

}  // namespace omgs_examples
