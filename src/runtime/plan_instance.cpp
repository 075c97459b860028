// The plan instance (plan_instance.hpp): everything that depends on the plan (its group
// exchanges, the selector they share, the engine that posts them), built whole and swapped
// in by install_plan(), the one path of construction, the profiler's replan and the closed
// loop's switch.
#include <algorithm>
#include <type_traits>

#include <omgs/detail/kokkos_helpers.hpp>

#include "plan/loop_candidate.hpp"
#include "runtime/exchange_kernels.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// Collective: builds the instance of `next` (checked identical on every rank) and swaps it
/// in for the one in force in one step. The progress engine (its communicators and thread)
/// outlives plans: the one in force takes the new instance's groups while idle (finish()
/// waited for every group) and moves to it. On an error (agreed by every rank) the instance
/// in force stays, its engine posting its groups as before, and the error is rethrown.
void RuntimeImpl::install_plan(Plan next) {
  const double t0 = now_s();
  check_plan(next);
  std::unique_ptr<PlanInstance> built;
  std::string err;
  try {
    check_sizes(next);
    built = build_instance(std::move(next));
  } catch (const Error& e) {
    err = e.what();
  }
  const double t1 = now_s();
  record(TraceKind::install_build, -1, t0, t1);
  agree_on_error(comm, err, "omgs");
  const double t2 = now_s();
  record(TraceKind::install_agree, -1, t1, t2);
  const bool replacing = instance_ != nullptr;
  if (replacing) instance_->gather_residual();  // before its group ranges are dropped
  const double t3 = now_s();
  record(TraceKind::install_release, -1, t2, t3);
  if (replacing) {
    instance_->engine->rebind(wires_of(*built));  // throws on every rank, changing nothing
    built->engine = std::move(instance_->engine);
    built->generation = instance_->generation + 1;
  } else {
    start_engine(*built);
  }
  record(TraceKind::install_engine, -1, t3, now_s());
  instance_ = std::move(built);
  loop_.plan_installed(instance_->plan.groups.size());
}

/// The closed loop's refit kept the groups in force: their plan, predicted by the refitted
/// model, replaces the instance's; the exchanges and the engine stay (no collective).
void RuntimeImpl::repredict_plan(Plan next) {
  if (!instance_ || !same_groups(next.groups, instance_->plan.groups))
    throw Error("omgs: internal: a re-predicted plan must have the groups in force");
  instance_->plan = std::move(next);
}

/// The exchanges of every group of `next`, and what they share; allocates, no collective.
std::unique_ptr<PlanInstance> RuntimeImpl::build_instance(Plan next) {
  auto p = std::make_unique<PlanInstance>();
  p->plan = std::move(next);
  const std::size_t G = p->plan.groups.size();
  ExchangeContext& c = p->ctx;
  c.flat = &flat_;
  c.ranks = size;
  c.swapped.assign(G, 0);
  c.pair_wire = options.pair_wire;
  c.blocking_allreduce = calibration.dense_allreduce.form == AllreduceForm::blocking;
  c.dense_wire = dense_wire();
  std::size_t max_n = 1, max_k = 1;
  try {
    for (std::size_t g = 0; g < G; ++g) {
      const Group& gr = p->plan.groups[g];
      GroupSlice slice{g, layer_offset[gr.begin], gr.numel, group_label(p->plan, g)};
      p->exchanges.push_back(make_exchange(gr.collective, std::move(slice), density_now, c));
      max_n = std::max<std::size_t>(max_n, gr.numel);
      max_k = std::max(max_k, p->exchanges.back()->k());
    }
    c.sel_index = Kokkos::View<std::uint32_t*, DeviceMemory>("omgs::selected_index", max_k);
    c.sel_value = Kokkos::View<float*, DeviceMemory>("omgs::selected_value", max_k);
    c.bad_blocks = Kokkos::View<int*, DeviceMemory>("omgs::bad_blocks", 1);
    c.bad_blocks_host = Kokkos::create_mirror_view(c.bad_blocks);
    c.selector = std::make_unique<ExchangeContext::Selector>(max_n, max_k);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("omgs: allocating the " + std::to_string(G) +
                " groups' exchange buffers and the top-k work buffers failed: " + e.what());
  }
  p->group_done.assign(G, 0);
  p->topk_start_s.assign(G, nan_s);
  p->topk_end_s.assign(G, nan_s);
  p->agg_start_s.assign(G, nan_s);
  p->agg_end_s.assign(G, nan_s);
  p->reset_remaining();
  return p;
}

/// What the exchanges of instance p give the engine to post, in plan order.
std::vector<GroupBuffers> RuntimeImpl::wires_of(const PlanInstance& p) {
  std::vector<GroupBuffers> wires;
  for (const auto& ex : p.exchanges) wires.push_back(ex->wire());
  return wires;
}

/// Collective: the engine of instance p, posting what its exchanges describe.
void RuntimeImpl::start_engine(PlanInstance& p) const {
  std::vector<GroupBuffers> wires = wires_of(p);
  ProgressOptions po;
  po.force_inline = options.force_inline_progress;
  po.pin = options.progress_pin;
  po.gpu_aware = options.gpu_aware;
  po.wait_timeout_s = options.wait_timeout_s;
  po.shutdown_timeout_s = options.shutdown_timeout_s;
  po.ranks_per_node = options.ranks_per_node;
  po.read_environment = false;  // the runtime applied (and checked) the environment
  // The host back-end's threads (OpenMP) per rank: the pin and the oversubscription
  // warning count them (docs/openmp.md).
  po.compute_threads = Kokkos::DefaultHostExecutionSpace().concurrency();
  if (!std::is_same<DeviceMemory, Kokkos::HostSpace>::value) {
    po.buffer_space = MemorySpace::device;
    po.copy_to_host = kernels::copy_to_host;
    po.copy_to_device = kernels::copy_to_device;
  }
  p.engine = std::make_unique<ProgressEngine>(comm, std::move(wires), po);
}

void PlanInstance::reset_remaining() {
  remaining.resize(plan.groups.size());
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    remaining[g] = plan.groups[g].end - plan.groups[g].begin;
}

void PlanInstance::gather_residual() {
  bool copied = false;
  const FlatBuffers& f = *ctx.flat;
  for (std::size_t g = 0; g < ctx.swapped.size(); ++g) {
    if (!ctx.swapped[g]) continue;
    const auto range = exchanges[g]->range();
    Kokkos::deep_copy(ctx.exec(), Kokkos::subview(f.resid, range),
                      Kokkos::subview(f.resid_alt, range));
    ctx.swapped[g] = 0;
    copied = true;
  }
  if (copied) detail::fence(ctx.exec());
}

}  // namespace omgs::detail
