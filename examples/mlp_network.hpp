// omgs-train-mlp's network: an MLP (D -> H -> H -> C, ReLU, softmax cross-entropy) with its
// parameters in one flat buffer, deterministic data and weights, and its forward/backward
// kernels (Kokkos, Kokkos Kernels gemm). examples/train_mlp.cpp trains it.
#pragma once

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <omgs/omgs.hpp>

// Kernels live in a named namespace: nvcc does not allow extended (KOKKOS_LAMBDA) lambdas
// in functions with internal linkage.
namespace omgs_train_mlp {

using Exec = omgs::ExecSpace;
using Mem = omgs::DeviceMemory;
using Vec = Kokkos::View<float*, Mem>;
using Labels = Kokkos::View<int*, Mem>;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;
using MatrixRef =
    Kokkos::View<float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using ConstMatrixRef =
    Kokkos::View<const float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

constexpr int num_tensors = 6;  // w1 b1 w2 b2 w3 b3, forward order
constexpr int eval_samples = 2048;
constexpr float center_scale = 1.0f;  // class centres ~ N(0, 1) per coordinate

KOKKOS_INLINE_FUNCTION float dev_exp(float x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::exp(x);
#else
  return Kokkos::Experimental::exp(x);
#endif
}

KOKKOS_INLINE_FUNCTION float dev_log(float x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::log(x);
#else
  return Kokkos::Experimental::log(x);
#endif
}

// ---------------------------------------------------------------------------------------
// Deterministic data and weights (std::mt19937 and std::seed_seq are fully specified, the
// normal variates are our own Box-Muller: the same numbers on every platform)
// ---------------------------------------------------------------------------------------

struct Normal {
  std::mt19937 gen;
  bool has_spare = false;
  double spare = 0;
  explicit Normal(std::seed_seq& seq) : gen(seq) {}
  double uniform() { return (static_cast<double>(gen()) + 0.5) / 4294967296.0; }  // (0, 1)
  double operator()() {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 6.283185307179586 * uniform();
    spare = r * std::sin(t);
    has_spare = true;
    return r * std::cos(t);
  }
};

/// n samples of the task: label uniform in [0, C), x = centre[label] + noise.
inline void make_samples(const std::vector<float>& centers, int classes, int dim, float noise,
                         int n, std::seed_seq& seq, const Matrix& x, const Labels& y) {
  Normal rng(seq);
  auto hx = Kokkos::create_mirror_view(x);
  auto hy = Kokkos::create_mirror_view(y);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.gen() % static_cast<std::uint32_t>(classes));
    hy(i) = c;
    for (int j = 0; j < dim; ++j)
      hx(i, j) = centers[static_cast<std::size_t>(c) * dim + j] + noise * static_cast<float>(rng());
  }
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(y, hy);
}

// ---------------------------------------------------------------------------------------
// The network: parameters in one flat buffer, tensor t at offset[t]
// ---------------------------------------------------------------------------------------

struct Shapes {
  std::array<int, 4> width;  // D, H, H, C
  std::array<std::size_t, num_tensors> numel{}, offset{};
  std::size_t total = 0;
  Shapes(int d, int h, int c) : width{d, h, h, c} {
    for (int k = 0; k < 3; ++k) {
      numel[2 * k] = static_cast<std::size_t>(width[k]) * width[k + 1];
      numel[2 * k + 1] = static_cast<std::size_t>(width[k + 1]);
    }
    for (int t = 0; t < num_tensors; ++t) {
      offset[t] = total;
      total += numel[t];
    }
  }
  static const char* name(int t) {
    static const char* const names[num_tensors] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    return names[t];
  }
};

/// Views of layer k's weight (rows x cols, LayoutRight) and bias inside a flat buffer.
inline MatrixRef weight_of(const Vec& flat, const Shapes& s, int k) {
  return MatrixRef(flat.data() + s.offset[2 * k], s.width[k], s.width[k + 1]);
}
inline Vec bias_of(const Vec& flat, const Shapes& s, int k) {
  const std::size_t o = s.offset[2 * k + 1];
  return Kokkos::subview(flat, std::make_pair(o, o + s.numel[2 * k + 1]));
}
/// A layer-sized 1-D gradient slot (the runtime's or ours) seen as the weight's matrix.
inline MatrixRef as_matrix(const omgs::GradientView& g, int rows, int cols) {
  return MatrixRef(g.data(), rows, cols);
}

/// Same weights on every rank and in both runs: He-normal hidden weights, a small output
/// layer (the first loss is ~ln C), zero biases.
inline void init_params(const Vec& params, const Shapes& s, std::uint32_t seed) {
  std::seed_seq seq{seed, 3u};
  Normal rng(seq);
  auto h = Kokkos::create_mirror_view(params);
  Kokkos::deep_copy(h, 0.0f);
  for (int k = 0; k < 3; ++k) {
    const double stdev = (k == 2 ? 0.1 : 1.0) * std::sqrt((k == 2 ? 1.0 : 2.0) / s.width[k]);
    for (std::size_t i = 0; i < s.numel[2 * k]; ++i)
      h(s.offset[2 * k] + i) = static_cast<float>(stdev * rng());
  }
  Kokkos::deep_copy(params, h);
}

/// Activations of one batch of `rows` samples (allocated once).
struct Activations {
  Matrix h1, h2, logits;  // post-ReLU hidden layers, logits (then their gradient)
  Matrix d1, d2;          // gradients w.r.t. the hidden pre-activations
  Activations(int rows, const Shapes& s)
      : h1("mlp::h1", rows, s.width[1]),
        h2("mlp::h2", rows, s.width[2]),
        logits("mlp::logits", rows, s.width[3]),
        d1("mlp::d1", rows, s.width[1]),
        d2("mlp::d2", rows, s.width[2]) {}
};

// ---------------------------------------------------------------------------------------
// Kernels (free functions; Kokkos Kernels gemm for the matrix products)
// ---------------------------------------------------------------------------------------

/// z(i, j) = max(z(i, j) + b(j), 0) if relu, else z(i, j) + b(j).
inline void add_bias(const Matrix& z, const Vec& b, bool relu) {
  const int cols = static_cast<int>(z.extent(1));
  Kokkos::parallel_for(
      "mlp::bias", Kokkos::RangePolicy<Exec>(0, z.extent(0) * z.extent(1)),
      KOKKOS_LAMBDA(const std::size_t n) {
        const std::size_t i = n / cols, j = n % cols;
        const float v = z(i, j) + b(j);
        z(i, j) = (relu && v < 0.0f) ? 0.0f : v;
      });
}

/// Logits of x (rows x D) into a.logits (and the hidden layers into a.h1, a.h2).
inline void forward(const Vec& params, const Shapes& s, const ConstMatrixRef& x,
                    const Activations& a) {
  KokkosBlas::gemm("N", "N", 1.0f, x, weight_of(params, s, 0), 0.0f, a.h1);
  add_bias(a.h1, bias_of(params, s, 0), true);
  KokkosBlas::gemm("N", "N", 1.0f, a.h1, weight_of(params, s, 1), 0.0f, a.h2);
  add_bias(a.h2, bias_of(params, s, 1), true);
  KokkosBlas::gemm("N", "N", 1.0f, a.h2, weight_of(params, s, 2), 0.0f, a.logits);
  add_bias(a.logits, bias_of(params, s, 2), false);
}

/// Softmax cross-entropy of each row: its loss into loss(loss_at + i), and the logits
/// replaced by d(mean loss)/d(logits) = (softmax - onehot) * scale.
inline void softmax_xent(const Matrix& z, const Labels& y, std::size_t label_at, const Vec& loss,
                         std::size_t loss_at, float scale) {
  const int cols = static_cast<int>(z.extent(1));
  Kokkos::parallel_for(
      "mlp::softmax", Kokkos::RangePolicy<Exec>(0, z.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) {
        float m = z(i, 0);
        for (int j = 1; j < cols; ++j) m = z(i, j) > m ? z(i, j) : m;
        float sum = 0.0f;
        for (int j = 0; j < cols; ++j) sum += dev_exp(z(i, j) - m);
        const int label = y(label_at + i);
        loss(loss_at + i) = m + dev_log(sum) - z(i, label);
        for (int j = 0; j < cols; ++j)
          z(i, j) = (dev_exp(z(i, j) - m) / sum - (j == label ? 1.0f : 0.0f)) * scale;
      });
}

/// g(j) = sum_i d(i, j): a bias gradient.
inline void column_sums(const Matrix& d, const omgs::GradientView& g) {
  const int rows = static_cast<int>(d.extent(0));
  Kokkos::parallel_for(
      "mlp::colsum", Kokkos::RangePolicy<Exec>(0, d.extent(1)), KOKKOS_LAMBDA(const std::size_t j) {
        float acc = 0.0f;
        for (int i = 0; i < rows; ++i) acc += d(i, j);
        g(j) = acc;
      });
}

/// d(i, j) = 0 where the ReLU output h(i, j) was 0.
inline void relu_backward(const Matrix& d, const Matrix& h) {
  const int cols = static_cast<int>(d.extent(1));
  Kokkos::parallel_for(
      "mlp::relu_bwd", Kokkos::RangePolicy<Exec>(0, d.extent(0) * d.extent(1)),
      KOKKOS_LAMBDA(const std::size_t n) {
        const std::size_t i = n / cols, j = n % cols;
        if (h(i, j) <= 0.0f) d(i, j) = 0.0f;
      });
}

/// Backward pass from the last layer to the first. grads[t] is tensor t's gradient slot;
/// ready(t) is called as soon as it is written (a.logits must hold d loss / d logits).
template <class Ready>
inline void backward(const Vec& params, const Shapes& s, const ConstMatrixRef& x,
                     const Activations& a, const std::array<omgs::GradientView, num_tensors>& grads,
                     Ready&& ready) {
  const int w = 0, b = 1;  // tensor 2k + w is layer k's weight, 2k + b its bias
  // Layer 3 (index 2): logits = h2 W3 + b3.
  column_sums(a.logits, grads[4 + b]);
  ready(4 + b);
  KokkosBlas::gemm("T", "N", 1.0f, a.h2, a.logits, 0.0f,
                   as_matrix(grads[4 + w], s.width[2], s.width[3]));
  ready(4 + w);
  KokkosBlas::gemm("N", "T", 1.0f, a.logits, weight_of(params, s, 2), 0.0f, a.d2);
  relu_backward(a.d2, a.h2);
  // Layer 2 (index 1): h2 = relu(h1 W2 + b2).
  column_sums(a.d2, grads[2 + b]);
  ready(2 + b);
  KokkosBlas::gemm("T", "N", 1.0f, a.h1, a.d2, 0.0f,
                   as_matrix(grads[2 + w], s.width[1], s.width[2]));
  ready(2 + w);
  KokkosBlas::gemm("N", "T", 1.0f, a.d2, weight_of(params, s, 1), 0.0f, a.d1);
  relu_backward(a.d1, a.h1);
  // Layer 1 (index 0): h1 = relu(x W1 + b1).
  column_sums(a.d1, grads[0 + b]);
  ready(0 + b);
  KokkosBlas::gemm("T", "N", 1.0f, x, a.d1, 0.0f, as_matrix(grads[0 + w], s.width[0], s.width[1]));
  ready(0 + w);
}

/// p(i) -= step * g(i)
inline void sgd(const Vec& p, const omgs::ConstGradientView& g, float step) {
  Kokkos::parallel_for(
      "mlp::sgd", Kokkos::RangePolicy<Exec>(0, p.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { p(i) -= step * g(i); });
}

inline double sum_of(const Vec& v) {
  double total = 0;
  Kokkos::parallel_reduce(
      "mlp::sum", Kokkos::RangePolicy<Exec>(0, v.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i, double& acc) { acc += v(i); }, total);
  return total;
}

/// Rows of `logits` whose argmax is the label.
inline long count_correct(const Matrix& logits, const Labels& y) {
  const int cols = static_cast<int>(logits.extent(1));
  long correct = 0;
  Kokkos::parallel_reduce(
      "mlp::accuracy", Kokkos::RangePolicy<Exec>(0, logits.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i, long& acc) {
        int best = 0;
        for (int j = 1; j < cols; ++j)
          if (logits(i, j) > logits(i, best)) best = j;
        if (best == y(i)) ++acc;
      },
      correct);
  return correct;
}

}  // namespace omgs_train_mlp
