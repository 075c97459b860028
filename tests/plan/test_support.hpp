// Shared helpers for the plan tests: random models and simple hand-checkable perf models.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs_test {

/// topk_s(n) = topk_per_elem * n, allgather_s(n) = alpha + beta * n (n > 0; 0 for n == 0).
/// Numbers chosen by the tests are exact binary fractions, so sums are exact.
class LinearModel final : public omgs::PerfModel {
 public:
  LinearModel(double topk_per_elem, double alpha, double beta)
      : t_(topk_per_elem), a_(alpha), b_(beta) {}
  double topk_s(std::uint64_t n) const override {
    return n == 0 ? 0.0 : t_ * static_cast<double>(n);
  }
  double allgather_s(std::uint64_t n, int, double) const override {
    return n == 0 ? 0.0 : a_ + b_ * static_cast<double>(n);
  }
  void check_workers(int) const override {}
  std::string describe() const override { return "linear test model"; }

 private:
  double t_, a_, b_;
};

inline std::vector<omgs::LayerSpec> random_layers(std::mt19937_64& rng, std::size_t L,
                                                  std::uint64_t max_numel = 5'000'000) {
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<std::uint64_t> small(1, 4096);
  std::uniform_int_distribution<std::uint64_t> big(1, max_numel);
  std::uniform_real_distribution<double> t(0.0, 5e-3);
  std::vector<omgs::LayerSpec> layers(L);
  for (std::size_t i = 0; i < L; ++i) {
    layers[i].name = "layer" + std::to_string(i);
    layers[i].numel = kind(rng) == 0 ? small(rng) : big(rng);
    // Some exact zeros and repeated values exercise ties in the comparisons.
    const int k = kind(rng);
    layers[i].backward_s = k == 0 ? 0.0 : (k == 1 ? 1e-3 : t(rng));
  }
  return layers;
}

/// A reference model (P in 2, 4, 8, 16) or a random alpha-beta model; sets workers.
inline std::unique_ptr<omgs::PerfModel> random_model(std::mt19937_64& rng, int& workers) {
  std::uniform_int_distribution<int> pick(0, 3);
  if (pick(rng) < 2) {
    const int ps[] = {2, 4, 8, 16};
    workers = ps[pick(rng)];
    return std::make_unique<omgs::ReferenceModel>();
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  workers = 1 + pick(rng) * 5;
  const auto form = pick(rng) % 2 ? omgs::TopkForm::linear : omgs::TopkForm::nlogn;
  return std::make_unique<omgs::AlphaBetaModel>(
      form, u(rng) * 1e-4, u(rng) * 1e-9,
      std::map<int, omgs::AlphaBeta>{{workers, {u(rng) * 5e-3, u(rng) * 1e-9}}});
}

/// A random alpha-beta model that also knows the dense allreduce (a table entry for P or a
/// formula of P, at random), with costs spread so that either collective can win; sets
/// workers.
inline std::unique_ptr<omgs::AlphaBetaModel> random_mixed_model(std::mt19937_64& rng,
                                                                int& workers) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 3);
  workers = 1 << (1 + pick(rng) * 3);  // 2, 16, 128, 1024
  omgs::CollectiveCosts allgather;
  omgs::CollectiveCosts allreduce;
  allgather.table[workers] = {u(rng) * 2e-3, u(rng) * 1e-9};
  if (pick(rng) % 2) {
    allreduce.table[workers] = {u(rng) * 2e-3, u(rng) * 2e-9};
  } else {
    allreduce.has_formula = true;
    allreduce.formula = {u(rng) * 1e-4, u(rng) * 1e-4, u(rng) * 1e-6, u(rng) * 1e-9};
  }
  const auto form = pick(rng) % 2 ? omgs::TopkForm::linear : omgs::TopkForm::nlogn;
  return std::make_unique<omgs::AlphaBetaModel>(form, u(rng) * 1e-4, u(rng) * 1e-9, allgather,
                                                allreduce);
}

}  // namespace omgs_test
