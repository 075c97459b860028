// omgs-train-torch: a libtorch training loop with omgs inside it. A CNN (conv x2, linear x2;
// --model cnn: 80 k parameters, wide_cnn: 3.2 M) learns Fashion-MNIST data-parallel (every
// rank takes its shard of each global batch) twice, from the same initial weights and in the
// same sample order:
//
//   dense   the gradient averaged with one MPI_Allreduce after backward
//   sparse  top-k with error feedback through omgs::Runtime. Each parameter's .grad() is a
//           tensor over its slot of the runtime's gradient buffer (zero copy when Kokkos'
//           memory is host memory; one copy per layer otherwise), and a post-hook on its
//           autograd gradient accumulator calls rt.ready(l) as soon as backward has written
//           it, so merged groups are sparsified and allgathered while backward goes on.
//           After rt.finish() the .grad() tensors point at rt.aggregated(l) for the step.
//
// Prints per epoch the training loss, the accuracy on the 10,000 test images, the iteration
// time and the bytes each rank hands to MPI per iteration, for both (and with --csv, each
// method's training time so far and accuracy per epoch, into a file); then PASS (exit 0) if
// the sparse run's final test accuracy is within --tolerance points of dense, else FAIL
// (exit 1). docs/torch.md explains the hooks.
#include <mpi.h>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <omgs/omgs.hpp>

#include "bounded_mpi.hpp"
#include "epoch_csv.hpp"
#include "fashion_mnist.hpp"
#include "gradient_saver.hpp"
#include "median.hpp"
#include "torch_args.hpp"

namespace omgs_train_torch {

/// Both models: conv, relu, max-pool 2, twice, then linear, relu, linear (ModelShape).
struct NetImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  explicit NetImpl(const ModelShape& m) {
    const auto conv = [&m](long in, long out) {
      return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, m.kernel).padding(m.padding));
    };
    const long side = m.side(28);
    conv1 = register_module("conv1", conv(1, m.channels1));
    conv2 = register_module("conv2", conv(m.channels1, m.channels2));
    fc1 = register_module("fc1", torch::nn::Linear(m.channels2 * side * side, m.hidden));
    fc2 = register_module("fc2", torch::nn::Linear(m.hidden, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc2(torch::relu(fc1(x.flatten(1))));
  }
};
TORCH_MODULE(Net);

/// Images as float [N, 1, 28, 28], normalized; labels int64.
struct Data {
  torch::Tensor train_x, train_y, test_x, test_y;
};

void to_tensors(const omgs_examples::Split& s, torch::Tensor& x, torch::Tensor& y) {
  const auto n = static_cast<long>(s.images.count);
  x = torch::from_blob(const_cast<std::uint8_t*>(s.images.pixels.data()),
                       {n, 1, static_cast<long>(s.images.rows), static_cast<long>(s.images.cols)},
                       torch::kUInt8)
          .to(torch::kFloat32)
          .div_(255.0f)
          .sub_(0.2860f)
          .div_(0.3530f);  // Fashion-MNIST's mean and standard deviation
  y = torch::from_blob(const_cast<std::uint8_t*>(s.labels.data()), {n}, torch::kUInt8)
          .to(torch::kInt64);
}

struct Context {
  const Args& a;
  const Data& d;
  MPI_Comm comm;
  int rank, size, iters;
};

/// Test accuracy in percent; each rank evaluates a slice of the test set.
double test_accuracy(const Context& c, Net& net) {
  torch::NoGradGuard no_grad;
  const long n = c.d.test_x.size(0), per = (n + c.size - 1) / c.size;
  const long begin = std::min(n, c.rank * per), end = std::min(n, begin + per);
  long correct = 0;
  for (long b = begin; b < end; b += 1000) {
    const long e = std::min(end, b + 1000);
    const auto pred = net->forward(c.d.test_x.slice(0, b, e)).argmax(1);
    correct += pred.eq(c.d.test_y.slice(0, b, e)).sum().item<long>();
  }
  MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_LONG, MPI_SUM, c.comm);
  return 100.0 * static_cast<double>(correct) / static_cast<double>(n);
}

/// One epoch's figures for one method (train_s: the training loop's wall time, rank 0's).
struct Epoch {
  double loss = 0, accuracy = 0, iteration_s = 0, bytes = 0, train_s = 0;
};

/// The method-specific part of an iteration: backward, averaging, gradients into .grad().
/// Returns the bytes this rank handed to MPI.
using Step = std::function<double(const torch::Tensor& loss)>;

Epoch train_epoch(const Context& c, Net& net, torch::optim::SGD& opt, int epoch, const Step& step) {
  // The same shuffle on every rank and for both methods: seeded by the epoch.
  const auto perm = torch::randperm(c.d.train_x.size(0),
                                    torch::make_generator<at::CPUGeneratorImpl>(c.a.seed + epoch));
  const long shard = c.a.batch / c.size;
  double loss_sum = 0, bytes = 0;
  std::vector<double> times;
  const double start = MPI_Wtime();
  for (int it = 0; it < c.iters; ++it) {
    const auto idx = perm.slice(0, static_cast<long>(it) * c.a.batch + c.rank * shard,
                                static_cast<long>(it) * c.a.batch + (c.rank + 1) * shard);
    const double t0 = MPI_Wtime();
    const auto loss = torch::nn::functional::cross_entropy(net->forward(c.d.train_x.index({idx})),
                                                           c.d.train_y.index({idx}));
    bytes += step(loss);
    opt.step();
    times.push_back(MPI_Wtime() - t0);
    loss_sum += loss.item<double>();
  }
  const double train_s = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, c.comm);
  return {loss_sum / c.iters / c.size, test_accuracy(c, net), omgs_examples::median(times),
          bytes / c.iters, train_s};
}

/// Dense data parallelism: the gradients flattened, one MPI_Allreduce, averaged back (this
/// rank's, before averaging, into `saver` while it wants them). Adds the allreduce's time to
/// comm_s.
Step dense_step(const Context& c, Net& net, omgs_examples::GradientSaver& saver, double& comm_s) {
  return [&c, &net, &saver, &comm_s](const torch::Tensor& loss) {
    for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
    loss.backward();
    std::vector<torch::Tensor> grads;
    for (auto& p : net->parameters()) grads.push_back(p.grad().view(-1));
    auto flat = torch::cat(grads);
    saver.add(flat);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr<float>(), static_cast<int>(flat.numel()), MPI_FLOAT,
                  MPI_SUM, c.comm);
    comm_s += MPI_Wtime() - t0;
    flat.div_(c.size);
    long at = 0;
    for (auto& g : grads) {
      g.copy_(flat.slice(0, at, at + g.numel()));
      at += g.numel();
    }
    return 4.0 * static_cast<double>(flat.numel());
  };
}

/// Calls a function after an autograd node ran: on a parameter's gradient accumulator, once
/// the parameter's .grad() holds this backward pass's gradient.
struct AfterNode : torch::autograd::FunctionPostHook {
  std::function<void()> fn;
  explicit AfterNode(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn();
    return outputs;
  }
};

constexpr bool zero_copy =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, omgs::DeviceMemory>::accessible;
using HostView = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Sparse data parallelism through omgs: parameter l (in net->parameters() order, i.e.
/// forward order) is omgs layer l.
struct SparseGlue {
  omgs::Runtime& rt;
  std::vector<torch::Tensor> params, slot, avg;  // .grad() during backward / for the step
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // keep the hooks alive
  omgs::Status first_bad = omgs::Status::ok;
  double sparsify_s = 0, wait_s = 0;  // summed over the iterations
  double bytes_per_pair = 0;          // the allgather's, last iteration (8 for pairs8)

  SparseGlue(omgs::Runtime& r, Net& net) : rt(r), params(net->parameters()) {
    for (std::size_t l = 0; l < params.size(); ++l) {
      const auto& p = params[l];
      if (zero_copy) {
        slot.push_back(torch::from_blob(rt.gradient(l).data(), p.sizes()));
        avg.push_back(torch::from_blob(const_cast<float*>(rt.aggregated(l).data()), p.sizes()));
      } else {  // Kokkos' memory is not host memory: torch's tensors, one copy each way
        slot.push_back(torch::zeros_like(p));
        avg.push_back(torch::zeros_like(p));
      }
      accumulators.push_back(torch::autograd::impl::grad_accumulator(p));
      accumulators.back()->add_post_hook(std::make_unique<AfterNode>([this, l] { ready(l); }));
    }
  }
  void ready(std::size_t l) {
    omgs::Status s;
    if (zero_copy) {
      s = rt.ready(l);  // backward accumulated straight into rt.gradient(l)
    } else {  // ready(l, view) takes a view in Kokkos' memory space: copy into the slot first
      Kokkos::deep_copy(rt.gradient(l), HostView(slot[l].data_ptr<float>(), slot[l].numel()));
      s = rt.ready(l);
    }
    if (s != omgs::Status::ok && first_bad == omgs::Status::ok) first_bad = s;
  }
  double step(const torch::Tensor& loss) {
    for (std::size_t l = 0; l < params.size(); ++l) {
      slot[l].zero_();  // autograd accumulates into a defined .grad() in place
      params[l].mutable_grad() = slot[l];
    }
    rt.begin_backward();
    loss.backward();  // the hooks call rt.ready(l), in backward order
    const omgs::IterationStats st = rt.finish();
    const omgs::Status s = first_bad != omgs::Status::ok ? first_bad : st.status;
    if (s != omgs::Status::ok) {
      std::fprintf(stderr, "omgs-train-torch: rank %d: %s: %s\n", rt.rank(), omgs::to_string(s),
                   rt.last_error().c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (std::size_t l = 0; l < params.size(); ++l) {
      if (!zero_copy)
        Kokkos::deep_copy(HostView(avg[l].data_ptr<float>(), avg[l].numel()), rt.aggregated(l));
      params[l].mutable_grad() = avg[l];
    }
    sparsify_s += st.sparsify_s;
    wait_s += st.finish_wait_s + st.aggregate_s;
    bytes_per_pair = st.bytes_per_pair;
    return static_cast<double>(st.bytes_sent);
  }
};

/// The pair wire in force: --pair-wire, else OMGS_PAIR_WIRE (the runtime reads it), else
/// the default.
std::string wire_name(const Args& a) {
  if (!a.pair_wire.empty()) return a.pair_wire;
  const char* env = std::getenv("OMGS_PAIR_WIRE");
  return env != nullptr ? std::string(env) + " (OMGS_PAIR_WIRE)" : "pairs8";
}

int run(const Args& a, MPI_Comm comm, int rank, int size) {
  Data d;
  {
    const auto train = omgs_examples::read_split(a.data_dir, "train");
    const auto test = omgs_examples::read_split(a.data_dir, "t10k");
    if (train.images.rows != 28 || train.images.cols != 28 || test.images.rows != 28 ||
        test.images.cols != 28)
      throw omgs_examples::IdxError("fashion-mnist: images are not 28x28 in " + a.data_dir);
    to_tensors(train, d.train_x, d.train_y);
    to_tensors(test, d.test_x, d.test_y);
    const long keep = std::min<long>(a.test_images, d.test_x.size(0));
    d.test_x = d.test_x.slice(0, 0, keep);
    d.test_y = d.test_y.slice(0, 0, keep);
  }
  int iters = static_cast<int>(d.train_x.size(0) / a.batch);
  if (a.max_batches > 0) iters = std::min(iters, a.max_batches);
  const Context c{a, d, comm, rank, size, iters};

  torch::manual_seed(static_cast<std::uint64_t>(a.seed));
  Net dense_net(a.model), sparse_net(a.model);
  {
    torch::NoGradGuard no_grad;
    auto from = dense_net->parameters(), to = sparse_net->parameters();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  std::vector<omgs::LayerSpec> layers;
  for (const auto& p : sparse_net->named_parameters())
    layers.push_back({p.key(), static_cast<std::uint64_t>(p.value().numel()), 0.0});
  omgs::RuntimeOptions opt;
  opt.density = a.density;
  opt.planner = a.planner;
  opt.force_inline_progress = a.inline_progress;
  if (!a.pair_wire.empty()) opt.pair_wire = omgs::parse_pair_wire(a.pair_wire);
  // Accuracy at low density (docs/api.md): with momentum correction the velocity lives in
  // omgs and the sparse run's optimizer is plain SGD.
  opt.momentum = a.momentum_correction ? a.momentum : 0.0;
  opt.clip_norm = a.clip;
  opt.warmup_density = a.warmup_density;
  opt.warmup_iterations = static_cast<std::uint64_t>(a.warmup_epochs) * iters;
  omgs::Runtime rt(comm, layers, opt);
  SparseGlue glue(rt, sparse_net);
  torch::optim::SGD dense_opt(dense_net->parameters(),
                              torch::optim::SGDOptions(a.lr).momentum(a.momentum)),
      sparse_opt(sparse_net->parameters(),
                 torch::optim::SGDOptions(a.lr).momentum(a.momentum_correction ? 0.0 : a.momentum));
  std::vector<std::pair<std::string, std::uint64_t>> saved_layers;
  for (const auto& l : layers) saved_layers.emplace_back(l.name, l.numel);
  omgs_examples::GradientSaver saver(a.save_gradients, a.save_iterations, comm, saved_layers);
  double dense_comm_s = 0;
  const Step dense = dense_step(c, dense_net, saver, dense_comm_s);
  omgs_examples::EpochCsv csv(a.csv, comm);
  const Step sparse = [&glue](const torch::Tensor& loss) { return glue.step(loss); };

  std::uint64_t numel = 0;
  for (const auto& l : layers) numel += l.numel;
  if (rank == 0) {
    std::printf(
        "omgs-train-torch: P = %d, %s of %llu parameters in %zu tensors, batch %d (%d/rank), "
        "%d iterations/epoch, density %g, planner %s, lr %g, momentum %g%s, warm-up %d epochs "
        "from %g, clip %g, pair wire %s, %s\n",
        size, a.model.name.c_str(), static_cast<unsigned long long>(numel), layers.size(), a.batch,
        a.batch / size, iters, a.density, std::string(omgs::to_string(a.planner)).c_str(), a.lr,
        a.momentum, a.momentum_correction ? " (sparse: momentum correction in omgs)" : "",
        a.warmup_epochs, a.warmup_density, a.clip, wire_name(a).c_str(),
        zero_copy ? "zero copy (.grad() over the runtime's buffers)"
                  : "one copy per layer (Kokkos memory is not host memory)");
    std::printf("%5s  %-6s  %10s  %8s  %12s  %14s\n", "epoch", "method", "train_loss", "test_acc",
                "iteration_ms", "bytes_sent/it");
    std::fflush(stdout);
  }
  Epoch de, sp;
  double dense_s = 0, sparse_s = 0;
  for (int e = 1; e <= a.epochs; ++e) {
    dense_comm_s = 0;
    de = train_epoch(c, dense_net, dense_opt, e, dense);
    glue.sparsify_s = glue.wait_s = 0;
    sp = train_epoch(c, sparse_net, sparse_opt, e, sparse);
    csv.row("dense", a.seed, e, dense_s += de.train_s, de.accuracy);
    csv.row("omgs", a.seed, e, sparse_s += sp.train_s, sp.accuracy);
    if (rank == 0) {
      for (const auto* r : {&de, &sp})
        std::printf("%5d  %-6s  %10.4f  %7.2f%%  %12.2f  %14.0f\n", e,
                    r == &de ? "dense" : "sparse", r->loss, r->accuracy, 1e3 * r->iteration_s,
                    r->bytes);
      std::printf("%5s  dense: MPI_Allreduce %.2f ms/it of %.2f ms/it (%.0f%%)\n", "",
                  1e3 * dense_comm_s / iters, 1e3 * de.train_s / iters,
                  100.0 * dense_comm_s / de.train_s);
      std::printf("%5s  sparse: omgs top-k + packing %.2f ms/it, finish() %.2f ms/it\n", "",
                  1e3 * glue.sparsify_s / iters, 1e3 * glue.wait_s / iters);
      std::fflush(stdout);
    }
  }
  const bool pass = sp.accuracy >= de.accuracy - a.tolerance;
  if (rank == 0) {
    std::printf(
        "sparse plan: %zu groups; bytes sent per rank per iteration: %.0f sparse (%.2f bytes per "
        "pair), %.0f dense: %.1fx fewer than dense\n",
        rt.plan().groups.size(), sp.bytes, glue.bytes_per_pair, de.bytes, de.bytes / sp.bytes);
    std::printf("%s: sparse test accuracy %.2f%%, dense %.2f%% (%+.2f points, tolerance %g)\n",
                pass ? "PASS" : "FAIL", sp.accuracy, de.accuracy, sp.accuracy - de.accuracy,
                a.tolerance);
    std::fflush(stdout);
  }
  return pass ? 0 : 1;
}

}  // namespace omgs_train_torch

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1, rc = 2;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  at::set_num_threads(1);  // one core per rank: ranks do not oversubscribe the machine
  omgs_train_torch::Args args;
  if ((rc = omgs_train_torch::parse_args(argc, argv, rank, size, args)) < 0) {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      rc = omgs_train_torch::run(args, MPI_COMM_WORLD, rank, size);
    } catch (const omgs_examples::IdxError& e) {  // every rank reads the same files
      if (rank == 0) std::fprintf(stderr, "omgs-train-torch: error: %s\n", e.what());
      rc = 1;
    } catch (const omgs::Error& e) {  // the Runtime's constructor throws alike on every rank
      if (rank == 0) std::fprintf(stderr, "omgs-train-torch: error: %s\n", e.what());
      rc = 1;
    } catch (const std::exception& e) {  // anything else (torch) may be this rank's alone
      std::fprintf(stderr, "omgs-train-torch: rank %d: error: %s\n", rank, e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  // Bounded like the other examples' (examples/bounded_mpi.hpp): a 2-rank job that had printed
  // its error once did not exit within omgs_example.torch_bad_data_dir's 120 s on a loaded
  // machine (Kokkos 4.6 OpenMP build; not reproduced in later runs).
  omgs_examples::job_bound.program = "omgs-train-torch";
  return omgs_examples::finalize_bounded(rc);
}
