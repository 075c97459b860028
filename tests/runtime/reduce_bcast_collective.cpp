// The test-only collective "reduce_bcast" (reduce_bcast_collective.hpp): row, line bytes,
// wire and exchange, and their one registration.
#include "reduce_bcast_collective.hpp"

#include <mpi.h>

#include <atomic>
#include <climits>
#include <memory>
#include <string>

#include "comm/engine_impl.hpp"
#include "comm/staged_buffers.hpp"
#include "comm/wire.hpp"
#include "plan/collective_costs.hpp"
#include "plan/collective_table.hpp"
#include "runtime/calibration_lines.hpp"
#include "runtime/group_exchange.hpp"

namespace omgs_test {
namespace {

using omgs::GroupBuffers;
using omgs::detail::GroupState;
using omgs::detail::Wire;

std::atomic<long> posts{0};
std::atomic<long> calibrations{0};

// A kind no built-in wire has.
constexpr auto kReduceBcastWire = static_cast<omgs::WireKind>(200);

// Bytes the line's beta multiplies: the reduce's and the broadcast's n floats each way.
double line_bytes(std::uint64_t numel, int, double, const omgs::detail::LineFormat& f) {
  return 2.0 * f.element_bytes * static_cast<double>(numel);
}

class ReduceBcastWire final : public Wire {
 public:
  explicit ReduceBcastWire(const GroupBuffers& b)
      : buffers_(b.dense_send, b.dense_recv), numel_(b.dense_numel) {}
  ~ReduceBcastWire() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  }

  std::string check(int g, const omgs::detail::WireSetup&) const override {
    if (numel_ > static_cast<std::size_t>(INT_MAX) || buffers_.send() == nullptr ||
        buffers_.recv() == nullptr)
      return "group " + std::to_string(g) + ": reduce_bcast needs dense buffers of <= INT_MAX";
    return "";
  }
  std::size_t k() const noexcept override { return 0; }
  std::uint64_t extent() const noexcept override { return numel_; }
  bool exchanges_counts() const noexcept override { return false; }
  bool phased() const noexcept override { return true; }
  // Collective (every rank sets up its groups in order): the wire's own communicator.
  void init(const omgs::detail::WireContext& ctx, bool staging, int) override {
    MPI_Comm_dup(ctx.comm, &comm_);
    buffers_.init(staging, numel_, numel_);
  }
  void stage_out(const omgs::CopyFunction& to_host, std::size_t) noexcept override {
    buffers_.stage_out(to_host, numel_);
  }
  void stage_in(const omgs::CopyFunction& to_device, const GroupState& s) noexcept override {
    if (!s.failed) buffers_.stage_in(to_device, numel_);
  }
  int post(const omgs::detail::WireContext&, const GroupState&,
           MPI_Request* req) noexcept override {
    *req = MPI_REQUEST_NULL;
    posts.fetch_add(1, std::memory_order_relaxed);
    broadcasting_ = false;
    return MPI_Ireduce(buffers_.mpi_send(), buffers_.mpi_recv(), static_cast<int>(numel_),
                       MPI_FLOAT, MPI_SUM, 0, comm_, &step_);
  }
  int advance(GroupState&, bool& done) noexcept override {
    done = false;
    int flag = 0;
    if (const int rc = MPI_Test(&step_, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
    if (!flag) return MPI_SUCCESS;
    if (broadcasting_) {
      done = true;
      return MPI_SUCCESS;
    }
    broadcasting_ = true;  // the sum is at rank 0: send it to every rank
    return MPI_Ibcast(buffers_.mpi_recv(), static_cast<int>(numel_), MPI_FLOAT, 0, comm_, &step_);
  }
  std::uint64_t bytes_sent(const GroupState&) const noexcept override {
    return numel_ * sizeof(float);
  }
  std::uint64_t bytes_received(const GroupState&) const noexcept override {
    return numel_ * sizeof(float);
  }

 private:
  omgs::detail::StagedBuffers<float> buffers_;
  std::size_t numel_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request step_ = MPI_REQUEST_NULL;
  bool broadcasting_ = false;
};

// The dense exchange's part of the iteration (the gradient as it is, averaged, a failure
// back into the residual), travelling on this collective's wire.
class ReduceBcastExchange final : public omgs::detail::GroupExchange {
 public:
  ReduceBcastExchange(omgs::detail::GroupSlice slice, omgs::detail::ExchangeContext& ctx)
      : GroupExchange(slice, ctx), dense_(omgs::detail::make_allreduce_exchange(slice, ctx)) {}
  std::size_t k() const noexcept override { return 0; }
  const std::string& region() const override { return dense_->region(); }
  const char* name() const noexcept override { return "reduce_bcast"; }
  GroupBuffers wire() const override {
    GroupBuffers b = dense_->wire();
    b.kind = kReduceBcastWire;
    b.blocking_allreduce = false;  // the dense wire's form: not this wire's
    return b;
  }
  void prepare(omgs::IterationStats& st) override { dense_->prepare(st); }
  bool contributed() const noexcept override { return dense_->contributed(); }
  std::size_t bytes_sent() const noexcept override { return dense_->bytes_sent(); }
  std::size_t bytes_received() const noexcept override { return dense_->bytes_received(); }
  void complete(omgs::WaitStatus w, omgs::detail::GroupReport r) override {
    dense_->complete(w, r);
  }

 private:
  std::unique_ptr<GroupExchange> dense_;
};

// Its line timed at start-up (calibration_lines.hpp): MPI_Reduce then MPI_Bcast of n floats
// at three sizes, the slowest rank's fastest of three, fitted on the line's bytes.
omgs::detail::LinearFit calibrate(const omgs::detail::CalibrationContext& c) {
  calibrations.fetch_add(1, std::memory_order_relaxed);
  std::vector<double> x;
  std::vector<std::vector<double>> samples;
  for (int n : {16, 4096, 65536}) {
    std::vector<float> send(static_cast<std::size_t>(n), 1.0f), recv(send.size());
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) {
      MPI_Barrier(c.comm);
      const double a = MPI_Wtime();
      MPI_Reduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, 0, c.comm);
      MPI_Bcast(recv.data(), n, MPI_FLOAT, 0, c.comm);
      t.push_back(MPI_Wtime() - a);
    }
    MPI_Allreduce(MPI_IN_PLACE, t.data(), 3, MPI_DOUBLE, MPI_MAX, c.comm);
    x.push_back(line_bytes(static_cast<std::uint64_t>(n), c.size, 0.0, {}));
    samples.push_back(std::move(t));
  }
  return omgs::detail::fit_latency_bandwidth(x, samples);
}

omgs::Collective register_all() {
  omgs::detail::register_line_bytes("reduce_bcast", line_bytes, line_bytes);
  omgs::detail::CollectiveRow row;
  row.name = "reduce_bcast";
  row.line = "reduce_bcast";  // timed by the model's line of that name
  row.wire_bytes = [](std::uint64_t n, int, double) { return 8.0 * static_cast<double>(n); };
  row.memory_bytes = [](std::uint64_t n, int, double) { return 8.0 * static_cast<double>(n); };
  row.max_mpi_count = [](std::uint64_t n, int, double) { return n; };
  const omgs::Collective id = omgs::detail::register_collective(std::move(row));
  omgs::detail::register_wire(
      kReduceBcastWire,
      [](const GroupBuffers& b) {
        GroupBuffers dense = b;
        dense.k = 0;
        omgs::detail::refuse_stray_fields(dense, omgs::detail::dense_fields);
        return std::unique_ptr<Wire>(std::make_unique<ReduceBcastWire>(b));
      },
      "reduce_bcast");
  omgs::detail::register_exchange(
      id,
      [](omgs::detail::GroupSlice slice, double, omgs::detail::ExchangeContext& ctx) {
        return std::unique_ptr<omgs::detail::GroupExchange>(
            std::make_unique<ReduceBcastExchange>(std::move(slice), ctx));
      },
      [](std::uint64_t n, std::uint64_t k, std::uint64_t ranks, const omgs::detail::WireFormats&) {
        return omgs::detail::allreduce_footprint(n, k, ranks);
      });
  omgs::detail::register_line_calibration("reduce_bcast", {false, calibrate});
  return id;
}

}  // namespace

omgs::Collective register_reduce_bcast() {
  static const omgs::Collective id = register_all();
  return id;
}

long reduce_bcast_posts() {
  return posts.load(std::memory_order_relaxed);
}

long reduce_bcast_calibrations() {
  return calibrations.load(std::memory_order_relaxed);
}

}  // namespace omgs_test
