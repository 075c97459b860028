// The runtime with sparse_exchange = allreduce (1, 2, 3, 4 and 8 ranks): every sparse group
// is a sparse allreduce; every rank ends with the same aggregated gradient, equal to a
// reference (every rank's host top-k, exchanged by a standalone SparseAllreduce fed the
// same pairs, itself checked against the gathered pairs in test_sparse_allreduce.cpp); no
// gradient mass is lost over many iterations of error feedback (zero gradients on some
// ranks); the option agreed across ranks; OMGS_SPARSE_EXCHANGE; a non-finite gradient fails
// the group on every rank. With every RuntimeOptions::pair_wire: the compact pair format's
// rounding errors are in the residual (the reference's dropped pairs carry them) and the
// stats count its bytes per pair.
#include <omgs/detail/sparse_allreduce.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"
#include "sparse_options.hpp"

using omgs::SparsePair;
using omgs::detail::SparseAllreduce;
using omgs_test::copy_to;
using omgs_test::fill_gradient;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> test_layers() {
  return {{"embed", 3000, 2e-4}, {"conv1", 1200, 1e-4},    {"bn1", 16, 1e-6},
          {"conv2", 5000, 3e-4}, {"fc.weight", 777, 5e-5}, {"fc.bias", 10, 1e-6}};
}

omgs::RuntimeOptions sar_options(double density, omgs::PairWire wire = omgs::PairWire::pairs8) {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = density;
  opt.pair_wire = wire;
  opt.perf_model = "calibrate";
  opt.sparse_exchange = omgs::SparseExchange::allreduce;
  opt.read_environment = false;
  return opt;
}

/// Host reference of this rank's selection: the k largest |acc| (ties: lower index).
std::vector<SparsePair> host_topk(const std::vector<float>& acc, std::size_t k) {
  std::vector<std::uint32_t> order(acc.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return std::fabs(acc[a]) > std::fabs(acc[b]);
  });
  order.resize(k);
  std::vector<SparsePair> out;
  for (std::uint32_t i : order) out.push_back({i, acc[i]});
  return out;
}

std::vector<float> group_values(omgs::Runtime& rt, const omgs::Group& gr, bool aggregated) {
  std::vector<float> out;
  for (std::size_t l = gr.begin; l < gr.end; ++l) {
    const auto v = to_host(aggregated ? rt.aggregated(l) : rt.residual(l));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

/// Whether `v` is the same, bit for bit, on every rank (rank 0's, broadcast).
bool same_on_every_rank(std::vector<float> v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = root == v;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

void check_against_reference(omgs::PairWire wire) {
  INFO(omgs::to_string(wire));
  const int P = world_size();
  omgs::RuntimeOptions opt = sar_options(0.03, wire);
  opt.refit_iterations = 0;  // the references are built per group of this plan: it must stay
  omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
  const std::size_t L = rt.num_layers(), G = rt.plan().groups.size();
  std::vector<std::unique_ptr<SparseAllreduce>> ref;
  for (std::size_t g = 0; g < G; ++g) {
    REQUIRE(rt.plan().groups[g].collective == omgs::Collective::sparse_allreduce);
    ref.push_back(std::make_unique<SparseAllreduce>(MPI_COMM_WORLD, rt.plan().groups[g].numel,
                                                    rt.group_k(g), wire));
  }
  std::mt19937 rng(1234 + 17 * world_rank());
  std::vector<std::vector<float>> resid(L);
  for (std::size_t l = 0; l < L; ++l) resid[l].assign(rt.layers()[l].numel, 0.0f);
  for (int it = 0; it < 5; ++it) {
    std::vector<std::vector<float>> grad(L);
    for (std::size_t l = L; l-- > 0;) {
      fill_gradient(rt, l, rng, grad[l]);
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    const omgs::IterationStats st = rt.finish();
    REQUIRE(st.status == omgs::Status::ok);
    if (P > 1) CHECK(st.bytes_sent > 0);
    CHECK(st.bytes_received > 0);
    // Pairs to the regions' owners and the survivors, in the format's bytes.
    CHECK(st.pairs_sent > 0);
    if (wire == omgs::PairWire::pairs8) CHECK(st.bytes_per_pair == 8.0);
    if (wire == omgs::PairWire::bf16 || wire == omgs::PairWire::fp16)
      CHECK(st.bytes_per_pair < 5.0);
    for (std::size_t g = 0; g < G; ++g) {
      const omgs::Group& gr = rt.plan().groups[g];
      std::vector<float> acc;
      for (std::size_t l = gr.begin; l < gr.end; ++l)
        for (std::size_t i = 0; i < grad[l].size(); ++i) acc.push_back(resid[l][i] + grad[l][i]);
      const std::vector<SparsePair> mine = host_topk(acc, rt.group_k(g));
      ref[g]->start(mine.data(), mine.size());
      REQUIRE(ref[g]->wait(60.0));
      // The aggregate: the survivors / P. The residual: acc less this rank's selection, its
      // dropped pairs (with a compact wire, the rounding errors too) put back.
      std::vector<double> expect(acc.size(), 0.0);
      for (const SparsePair& p : ref[g]->survivors()) expect[p.index] = p.value / P;
      std::vector<float> expect_resid = acc;
      for (const SparsePair& p : mine) expect_resid[p.index] = 0.0f;
      for (const SparsePair& p : ref[g]->dropped()) expect_resid[p.index] += p.value;
      const std::vector<float> got = group_values(rt, gr, true);
      for (std::size_t i = 0; i < got.size(); ++i)
        REQUIRE(got[i] == Approx(expect[i]).margin(1e-6));
      CHECK(same_on_every_rank(got));
      REQUIRE(group_values(rt, gr, false) == expect_resid);
      std::size_t off = 0;
      for (std::size_t l = gr.begin; l < gr.end; ++l)
        for (std::size_t i = 0; i < grad[l].size(); ++i) resid[l][i] = expect_resid[off++];
    }
  }
}

}  // namespace

TEST_CASE("sparse allreduce exchange: every rank the same aggregate, equal to the reference",
          "[runtime][sparse_allreduce]") {
  // Every wire up to 4 ranks; at 8 (oversubscribed 4x in CI, a minute a wire under MPICH)
  // the 8-byte pairs and one compact form, whose code the other compact forms share.
  const bool all = world_size() <= 4;
  for (const omgs::PairWire wire :
       {omgs::PairWire::pairs8, omgs::PairWire::fp32, omgs::PairWire::bf16, omgs::PairWire::fp16})
    if (all || wire == omgs::PairWire::pairs8 || wire == omgs::PairWire::bf16)
      check_against_reference(wire);
}

TEST_CASE("sparse allreduce exchange: no gradient mass is lost over many iterations",
          "[runtime][sparse_allreduce]") {
  const int me = world_rank();
  using W = omgs::PairWire;
  int config = 0;
  for (const auto& [planner, wire] : {std::make_pair(omgs::Planner::mgs, W::pairs8),
                                      std::make_pair(omgs::Planner::layerwise, W::fp16),
                                      std::make_pair(omgs::Planner::layerwise, W::pairs8),
                                      std::make_pair(omgs::Planner::mgs, W::bf16)}) {
    if (world_size() > 4 && config++ >= 2) break;  // 8 ranks: one of each planner (as above)
    INFO(omgs::to_string(wire));
    omgs::RuntimeOptions opt = sar_options(0.01, wire);
    opt.planner = planner;
    omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
    std::mt19937 rng(99 + me);
    omgs_test::MassLedger books(rt);
    std::vector<float> g;
    for (int it = 0; it < 40; ++it) {
      for (std::size_t l = rt.num_layers(); l-- > 0;) {
        fill_gradient(rt, l, rng, g);
        // Rank 0's small layers stay zero: its pairs there are zeros, regions empty of mass.
        if (me == 0 && rt.layers()[l].numel < 100) {
          std::fill(g.begin(), g.end(), 0.0f);
          copy_to(rt.gradient(l), g);
        }
        books.add_gradient(l, g);
        REQUIRE(rt.ready(l) == omgs::Status::ok);
      }
      REQUIRE(rt.finish().status == omgs::Status::ok);
      books.add_applied(rt);
    }
    std::string where;
    const bool kept = books.conserved(rt, 1e-3, where);
    INFO(where);
    REQUIRE(kept);
  }
}

TEST_CASE("sparse allreduce exchange: tied sums keep at most k + P - 1 survivors, no mass lost",
          "[runtime][sparse_allreduce]") {
  // Kind 0: rank r's gradient is +-P/4 at the entries i = r mod P, 0 elsewhere: each rank
  // selects k entries of its own, so P k distinct sums tie at one magnitude (after error
  // feedback at 2 P/4, 3 P/4, ...), all of which survived without the cut and overflow the
  // survivors' buffer of k + P - 1 pairs. Kind 1: zeros but for two entries a rank, k above
  // the nonzero sums: the selected zeros tie. Every value and sum is exact in bf16.
  const int me = world_rank(), P = world_size();
  using W = omgs::PairWire;
  for (const auto& [planner, wire] : {std::make_pair(omgs::Planner::layerwise, W::pairs8),
                                      std::make_pair(omgs::Planner::mgs, W::bf16)})
    for (int kind = 0; kind < 2; ++kind) {
      INFO(omgs::to_string(wire) << ", kind " << kind << ", ranks " << P);
      omgs::RuntimeOptions opt = sar_options(0.01, wire);
      opt.planner = planner;
      opt.refit_iterations = 0;  // one plan: group_k(g) stays the plan's
      omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
      omgs_test::MassLedger books(rt);
      std::vector<float> g;
      for (int it = 0; it < 4; ++it) {
        for (std::size_t l = rt.num_layers(); l-- > 0;) {
          g.assign(rt.layers()[l].numel, 0.0f);
          for (std::size_t i = static_cast<std::size_t>(me); i < g.size(); i += P) {
            const std::size_t j = i / static_cast<std::size_t>(P);
            if (kind == 0) g[i] = (j % 2 ? -0.25f : 0.25f) * static_cast<float>(P);
            if (kind == 1 && j < 2) g[i] = 1.0f + static_cast<float>(me);
          }
          copy_to(rt.gradient(l), g);
          books.add_gradient(l, g);
          REQUIRE(rt.ready(l) == omgs::Status::ok);
        }
        REQUIRE(rt.finish().status == omgs::Status::ok);
        books.add_applied(rt);
        for (std::size_t gi = 0; gi < rt.plan().groups.size(); ++gi) {
          const omgs::Group& gr = rt.plan().groups[gi];
          REQUIRE(gr.collective == omgs::Collective::sparse_allreduce);
          const std::vector<float> agg = group_values(rt, gr, true);
          const auto nonzero = static_cast<std::size_t>(
              std::count_if(agg.begin(), agg.end(), [](float x) { return x != 0.0f; }));
          CHECK(same_on_every_rank(agg));
          // Kind 0's sums are never 0: the aggregate's nonzero entries are the survivors.
          CHECK(nonzero <= rt.group_k(gi) + static_cast<std::size_t>(P) - 1);
          if (kind == 0) CHECK(nonzero >= std::min<std::size_t>(rt.group_k(gi), agg.size()));
        }
      }
      // The survivors / P are exact where P is a power of two (1 / P too).
      std::string where;
      const bool kept = books.conserved(rt, (P & (P - 1)) == 0 ? 0.0 : 1e-5, where);
      INFO(where);
      REQUIRE(kept);
    }
}

TEST_CASE("sparse allreduce exchange: the option is agreed and read from the environment",
          "[runtime][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  if (P > 1) {
    omgs::RuntimeOptions opt = sar_options(0.01);
    if (me == 0) opt.sparse_exchange = omgs::SparseExchange::allgather;
    CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, test_layers(), opt),
                      Catch::Contains("ranks disagree on the option sparse_exchange"));
  }
  omgs::RuntimeOptions opt = sar_options(0.01);
  opt.sparse_exchange = omgs::SparseExchange::allgather;
  opt.read_environment = true;
  ::setenv("OMGS_SPARSE_EXCHANGE", "allreduce", 1);
  {
    omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
    for (const omgs::Group& g : rt.plan().groups)
      CHECK(g.collective == omgs::Collective::sparse_allreduce);
  }
  ::setenv("OMGS_SPARSE_EXCHANGE", "sparse", 1);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, test_layers(), opt),
                    Catch::Contains("OMGS_SPARSE_EXCHANGE='sparse'"));
  ::unsetenv("OMGS_SPARSE_EXCHANGE");
  // automatic: the planner picks either sparse exchange per group by the calibrated costs
  // (which one depends on this machine and MPI); mgs never plans a dense group.
  opt.sparse_exchange = omgs::SparseExchange::automatic;
  omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
  for (const omgs::Group& g : rt.plan().groups) {
    CHECK(g.collective != omgs::Collective::dense);
    // At two ranks the sparse allreduce cannot beat the allgather (allowed_collectives).
    if (world_size() == 2) CHECK(g.collective == omgs::Collective::sparse);
  }
}

TEST_CASE("sparse allreduce exchange: a non-finite gradient fails the group on every rank",
          "[runtime][sparse_allreduce]") {
  const int P = world_size(), me = world_rank();
  omgs::RuntimeOptions opt = sar_options(0.02);
  opt.planner = omgs::Planner::layerwise;
  omgs::Runtime rt(MPI_COMM_WORLD, test_layers(), opt);
  std::mt19937 rng(7 + me);
  std::vector<float> g;
  for (int it = 0; it < 3; ++it) {
    for (std::size_t l = rt.num_layers(); l-- > 0;) {
      fill_gradient(rt, l, rng, g);
      if (it == 1 && l == 3 && me == P - 1) {
        g[17] = std::nanf("");
        copy_to(rt.gradient(l), g);
      }
      REQUIRE(rt.ready(l) == omgs::Status::ok);
    }
    const omgs::IterationStats st = rt.finish();
    if (it != 1) {
      REQUIRE(st.status == omgs::Status::ok);
      continue;
    }
    REQUIRE(st.status == omgs::Status::nonfinite_gradient);
    CHECK(rt.last_error().find("sparse allreduce") != std::string::npos);
    const auto a = to_host(rt.aggregated(3));
    CHECK(std::all_of(a.begin(), a.end(), [](float x) { return x == 0.0f; }));
    CHECK(std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); }));
  }
}
