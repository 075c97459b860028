// The examples' dense baselines (see dense_baseline.hpp).
#include "dense_baseline.hpp"
#include "bounded_mpi.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

namespace omgs_examples {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using HostFloats = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace

std::vector<Bucket> make_buckets(const std::vector<std::uint64_t>& numel, double bucket_bytes,
                                 double first_bucket_bytes) {
  if (numel.empty()) throw omgs::Error("dense baseline: no layers");
  std::vector<Bucket> out;
  std::size_t end = numel.size();
  double bytes = 0;
  for (std::size_t l = numel.size(); l-- > 0;) {
    bytes += 4.0 * static_cast<double>(numel[l]);
    const double cap = out.empty() ? std::min(first_bucket_bytes, bucket_bytes) : bucket_bytes;
    if (bytes >= cap || l == 0) {
      out.push_back({l, end});
      end = l;
      bytes = 0;
    }
  }
  return out;
}

std::string AllreduceVariant::describe() const {
  const std::string call = blocking ? "MPI_Allreduce (blocking) " : "MPI_Iallreduce ";
  const std::string alg =
      setting >= 0
          ? std::string(omgs::allreduce_settings()[static_cast<std::size_t>(setting)].label) +
                " (MPI_T)"
          : omgs::describe_allreduce_setting();
  return call + (in_place ? "in-place" : "separate-buf") + " (" + alg + "), " +
         (progress_thread ? "progress thread" : "progressed inline");
}

AllreduceVariant choose_allreduce(MPI_Comm comm, std::size_t numel, int trials,
                                  omgs::AllreduceFormChoice* choice) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  const bool threaded = level == MPI_THREAD_MULTIPLE;
  std::vector<omgs::AllreduceForm> forms = {omgs::AllreduceForm::nonblocking_in_place,
                                            omgs::AllreduceForm::nonblocking};
  if (threaded) forms.push_back(omgs::AllreduceForm::blocking);
  const omgs::AllreduceFormChoice c = omgs::choose_allreduce_form(comm, numel, trials, forms);
  if (choice) *choice = c;
  AllreduceVariant v;
  v.progress_thread = threaded;
  v.blocking = c.form == omgs::AllreduceForm::blocking;
  v.in_place = c.form == omgs::AllreduceForm::nonblocking_in_place;
  v.setting = c.setting;
  return v;
}

DenseExchange::DenseExchange(MPI_Comm comm, const std::vector<std::uint64_t>& numel,
                             std::vector<Bucket> buckets, AllreduceVariant variant)
    : comm_(comm), buckets_(std::move(buckets)), variant_(variant) {
  if (variant_.blocking && !variant_.progress_thread)
    throw omgs::Error("dense baseline: a blocking MPI_Allreduce needs the progress thread");
  MPI_Comm_size(comm_, &size_);
  const std::size_t L = numel.size();
  offset_.assign(L + 1, 0);
  for (std::size_t l = 0; l < L; ++l) offset_[l + 1] = offset_[l] + numel[l];
  bucket_of_begin_.assign(L, -1);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    if (k.begin >= k.end || k.end > L || offset_[k.end] - offset_[k.begin] > 2147483647u)
      throw omgs::Error("dense baseline: bucket " + std::to_string(b) +
                        " is empty, out of range "
                        "or over 2^31-1 elements");
    bucket_of_begin_[k.begin] = static_cast<int>(b);
  }
  grad_ = omgs::GradientView("omgs_examples::dense", offset_[L]);
  // Host memory: MPI reads the gradient where backward wrote it, and sums into it (in place)
  // or into recv_. Device memory: staged, each layer copied into recv_ (in place) or send_.
  if constexpr (on_gradient) {
    send_base_ = grad_.data();
    if (!variant_.in_place) recv_.assign(offset_[L], 0.0f);
    recv_base_ = variant_.in_place ? grad_.data() : recv_.data();
  } else {
    recv_.assign(offset_[L], 0.0f);
    if (!variant_.in_place) send_.assign(offset_[L], 0.0f);
    send_base_ = variant_.in_place ? recv_.data() : send_.data();
    recv_base_ = recv_.data();
  }
  progress_ = std::make_unique<BucketProgress>(
      comm_, static_cast<int>(buckets_.size()), [this](int b, MPI_Request* req) { post(b, req); },
      [this](int b) { average(b); }, variant_.progress_thread);
}

DenseExchange::~DenseExchange() = default;

DenseIteration DenseExchange::iterate(const Produce& produce) {
  barrier_or_abort(comm_, "the dense baseline's barrier");
  begin();
  for (std::size_t l = offset_.size() - 1; l-- > 0;) {
    produce(l, gradient(l));
    ready(l);
  }
  return finish();
}

void DenseExchange::begin() {
  if (active_) throw omgs::Error("dense baseline: begin() twice without finish()");
  active_ = true;
  next_ = offset_.size() - 1;
  // Every rank alike (the variant was agreed); a compare when nothing else changed it.
  if (!variant_.blocking && omgs::applied_allreduce_setting() != variant_.setting)
    omgs::apply_allreduce_setting(variant_.setting);
  progress_->start();
  t0_ = now_s();
}

omgs::GradientView DenseExchange::gradient(std::size_t l) const {
  if (l + 1 >= offset_.size())
    throw omgs::Error("dense baseline: layer " + std::to_string(l) + " out of range");
  return Kokkos::subview(grad_, std::make_pair(offset_[l], offset_[l + 1]));
}

void DenseExchange::ready(std::size_t l) {
  if (!active_ || next_ == 0 || l != next_ - 1)
    throw omgs::Error("dense baseline: layer " + std::to_string(l) +
                      " is ready out of order (layers come from the last to the first, once "
                      "an iteration, between begin() and finish())");
  next_ = l;
  omgs::ExecSpace().fence();  // the gradient's kernels are done
  if constexpr (!on_gradient)
    Kokkos::deep_copy(HostFloats(send_base_ + offset_[l], offset_[l + 1] - offset_[l]),
                      gradient(l));
  const int b = bucket_of_begin_[l];
  if (b >= 0) progress_->ready(b);
}

void DenseExchange::post(int b, MPI_Request* req) {
  const Bucket& k = buckets_[static_cast<std::size_t>(b)];
  const std::size_t at = offset_[k.begin];
  if (variant_.blocking) {  // on the progress thread; done when it returns
    MPI_Allreduce(variant_.in_place ? MPI_IN_PLACE : send_base_ + at, recv_base_ + at,
                  static_cast<int>(offset_[k.end] - at), MPI_FLOAT, MPI_SUM, comm_);
    *req = MPI_REQUEST_NULL;
    return;
  }
  MPI_Iallreduce(variant_.in_place ? MPI_IN_PLACE : send_base_ + at, recv_base_ + at,
                 static_cast<int>(offset_[k.end] - at), MPI_FLOAT, MPI_SUM, comm_, req);
}

void DenseExchange::average(int b) {
  // A plain loop: this may run on the progress thread, which must not launch Kokkos kernels
  // beside the owner's.
  const Bucket& k = buckets_[static_cast<std::size_t>(b)];
  const float inv = 1.0f / static_cast<float>(size_);
  float* out = on_gradient ? grad_.data() : recv_.data();
  for (std::size_t i = offset_[k.begin]; i < offset_[k.end]; ++i) out[i] = recv_base_[i] * inv;
}

DenseIteration DenseExchange::finish() {
  if (!active_ || next_ != 0)
    throw omgs::Error(active_ ? "dense baseline: finish() before layer " +
                                    std::to_string(next_ - 1) + " was ready"
                              : std::string("dense baseline: finish() without begin()"));
  active_ = false;
  const double t1 = now_s();
  progress_->finish("the dense baseline's MPI_Iallreduce");
  if constexpr (!on_gradient) Kokkos::deep_copy(grad_, HostFloats(recv_.data(), recv_.size()));
  const double t2 = now_s();
  return {t2 - t0_, t2 - t1};
}

std::vector<float> DenseExchange::averaged() const {
  std::vector<float> out(grad_.extent(0));
  Kokkos::deep_copy(HostFloats(out.data(), out.size()), grad_);
  return out;
}

DenseExchange make_dense_exchange(MPI_Comm comm, const std::vector<std::uint64_t>& numel,
                                  double bucket_mb, int trials, omgs::AllreduceFormChoice* choice) {
  std::vector<Bucket> buckets = make_buckets(numel, bucket_mb * 1e6, ddp_first_bucket_bytes);
  std::uint64_t biggest = 0;  // elements of the largest bucket: what the variant is timed on
  for (const Bucket& b : buckets) {
    std::uint64_t n = 0;
    for (std::size_t l = b.begin; l < b.end; ++l) n += numel[l];
    biggest = std::max(biggest, n);
  }
  const AllreduceVariant variant = choose_allreduce(comm, biggest, trials, choice);
  return DenseExchange(comm, numel, std::move(buckets), variant);
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i];
    const double d = std::fabs(x - static_cast<double>(b[i])) / std::max(1.0, std::fabs(x));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace omgs_examples
