// Module select: exact top-k by magnitude on any Kokkos execution space, with the fused
// error-feedback form the runtime uses (acc = residual + grad, select from acc, the new
// residual is acc with the selected entries zeroed).
//
// Three paths (docs/select.md: passes, launches, round trips), all exact and identical on
// every backend, on the 31-bit magnitude key (float bits & 0x7fffffff, ordered as |x|):
//   small (n <= 8192): one team does a radix select (11 + 11 + 9 bit digits) and writes the
//          output (and residual) in index order: one launch, one read-back.
//   sampled (the common case): a parallel kernel gathers a jittered strided sample of the
//          input in blocks of 16 entries, one team sets from it a lower key bound some
//          standard deviations below the sample's estimate of the k-th key; ONE fused pass counts
//          the non-finite entries and compacts every entry at or above the bound, in index order,
//          into per-team segments of the candidate buffer (no global atomics); one team resolves
//          the exact threshold on the candidates and writes the output; the in-place feedback form
//          then writes the residual in one fully parallel pass, the out-of-place (one-read) form
//          writes residual_out = acc in the fused pass and the resolve zeroes the selected entries.
//          One host read-back (the per-team counts).
//   radix: full histogram passes (detail/select_radix.hpp), when k is too large for the
//          candidate buffer, or as the fallback when the bracket missed (too few candidates,
//          or a segment overflowed, e.g. all values equal).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/select_radix.hpp>
#include <omgs/detail/select_sampled.hpp>
#include <omgs/error.hpp>
#include <omgs/export.hpp>

namespace omgs {

/// Outcome of one selection. Per-call functions report problems here; they never throw.
enum class TopkStatus : std::uint8_t {
  ok = 0,
  nonfinite_input,     ///< NaN or +-Inf found (in acc for the feedback form); nothing written
  k_exceeds_n,         ///< k > n; nothing written
  n_exceeds_capacity,  ///< n > the selector's max_n; nothing written
  output_too_small,    ///< out_index or out_value holds fewer than k entries; nothing written
  shape_mismatch,      ///< grad and residual differ in length; nothing written
  residual_overlap,    ///< residual_in and residual_out overlap (not the same); nothing written
};

/// A short English name of the status ("ok", "non-finite input", ...).
OMGS_EXPORT const char* to_string(TopkStatus status) noexcept;

/// Which algorithm served a call (TopkSelector::last_path()); docs/select.md.
enum class TopkPath : std::uint8_t {
  none = 0,        ///< no call yet, or an argument error
  small,           ///< n <= 8192: one team
  sampled,         ///< sampled bracket, one fused pass
  radix,           ///< radix path chosen up front (k = 0, or k too large for the sampled path)
  radix_fallback,  ///< the sampled bracket missed; the radix path finished the call
};

struct TopkResult {
  TopkStatus status = TopkStatus::ok;
  /// Number of non-finite entries (NaN, +-Inf) of the input (of acc = residual + grad for the
  /// feedback form). When it is > 0 the status is nonfinite_input and the outputs and the
  /// residual are left exactly as they were.
  std::uint64_t nonfinite = 0;
  /// Entries written to the outputs: k on success, 0 otherwise.
  std::uint64_t selected = 0;
  bool ok() const noexcept { return status == TopkStatus::ok; }
};

/// Reusable top-k selector for one execution space. All work buffers are allocated by the
/// constructor (sized from the largest n, max_n) and reused: select() and
/// select_with_feedback() never allocate and never throw; they return a TopkResult.
///
/// Kernels are enqueued on the execution space instance given at construction. The call
/// synchronizes once (small and sampled paths: to read the non-finite / candidate counts
/// back to the host; the radix path up to three times); the outputs are complete after
/// exec.fence() (the call itself does not fence at its end). Not thread-safe: one selector
/// per thread of control.
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class TopkSelector {
 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using ConstVector = Kokkos::View<const float*, memory_space>;
  using Vector = Kokkos::View<float*, memory_space>;
  using IndexVector = Kokkos::View<std::uint32_t*, memory_space>;

  /// Largest n any selector accepts: indices are 32-bit.
  static constexpr std::size_t max_supported_n = std::numeric_limits<std::uint32_t>::max();

  /// max_n: the largest input. max_k: the largest k served by the fast path (larger k still
  /// work, through the slow path); defaults to max_n. candidate_capacity: size of the
  /// candidate buffer (entries of the threshold bucket); 0 picks max(16384, max_n / 8).
  /// Memory: 8 * (max_k + 2 * candidate_capacity) bytes plus ~80 KiB. Throws omgs::Error
  /// when max_n exceeds max_supported_n.
  explicit TopkSelector(std::size_t max_n, std::size_t max_k = std::size_t(-1),
                        std::size_t candidate_capacity = 0, const ExecSpace& exec = ExecSpace())
      : exec_(exec), max_n_(max_n) {
    if (max_n > max_supported_n) {
      throw Error("omgs::TopkSelector: max_n = " + std::to_string(max_n) +
                  " exceeds the 32-bit index limit " + std::to_string(max_supported_n));
    }
    max_k_ = max_k < max_n ? max_k : max_n;
    cap_ = candidate_capacity != 0 ? candidate_capacity
                                   : (max_n / 8 > 16384 ? max_n / 8 : std::size_t(16384));
    if (cap_ > max_n) cap_ = max_n;
    const std::size_t sel = cap_ < max_k_ ? cap_ : max_k_;
    const auto alloc = [](const char* label) { return Kokkos::view_alloc(std::string(label)); };
    nonfinite_ = Kokkos::View<std::uint64_t*, memory_space>(alloc("omgs::select::nonfinite"), 1);
    nonfinite_host_ = Kokkos::create_mirror_view(nonfinite_);
    state_ = IndexVector(alloc("omgs::select::state"), 8);
    cand_index_ = IndexVector(alloc("omgs::select::cand_index"), cap_);
    cand_value_ = Vector(alloc("omgs::select::cand_value"), cap_);
    bucket_ = Vector(alloc("omgs::select::bucket"), detail::select_bucket_cap);
    radix_ = detail::RadixPath<ExecSpace>(
        {state_, cand_index_, cand_value_, nonfinite_, nonfinite_host_}, max_k_, cap_, sel);
    // Teams: at least select_team_chunk_min entries each (small inputs: one team), at most
    // a few per unit of concurrency.
    using Hist = detail::SelectHistogram<ExecSpace, false>;
    Hist probe;
    probe.bins = detail::select_bins1;
    const int team_size =
        Kokkos::TeamPolicy<ExecSpace>(exec_, 1, Kokkos::AUTO)
            .set_scratch_size(0,
                              Kokkos::PerTeam(Hist::ScratchU32::shmem_size(detail::select_bins1)))
            .team_size_recommended(probe, Kokkos::ParallelForTag());
    const int conc = detail::cached_concurrency(exec_);
    max_league_ = 4 * conc / (team_size > 0 ? team_size : 1);
    if (max_league_ < 1) max_league_ = 1;
    counts_ = IndexVector(alloc("omgs::select::counts"), 2 * static_cast<std::size_t>(max_league_));
    counts_host_ = Kokkos::create_mirror_view(counts_);
  }

  std::size_t max_n() const noexcept { return max_n_; }
  std::size_t max_k() const noexcept { return max_k_; }
  std::size_t candidate_capacity() const noexcept { return cap_; }
  const ExecSpace& execution_space_instance() const noexcept { return exec_; }

  /// The path the last successful-argument call took (tests and benchmarks).
  TopkPath last_path() const noexcept { return last_path_; }

  /// Test hook: rank > 0 makes the sampled path (n > select_small_n, k > 0) always run, with
  /// its lower bound at the rank-th largest sample entry (1: the sample's maximum, so the
  /// bracket usually holds too few candidates; the sample size: usually too many), which
  /// forces the radix fallback. 0 restores the automatic choice.
  void force_sample_rank(std::int64_t rank) noexcept { forced_rank_ = rank; }

  /// Top k of x by magnitude: out_index[0, k) ascending indices (relative to x), out_value
  /// the signed values. Among equal magnitudes the lower index wins.
  TopkResult select(const ConstVector& x, std::size_t k, const IndexVector& out_index,
                    const Vector& out_value) {
    return run<false, false>(x, ConstVector(), Vector(), k, out_index, out_value);
  }

  /// Fused error feedback: acc = residual + grad (float add, per element), top k of acc as in
  /// select(), and residual = acc with the selected entries set to 0. On any non-ok status
  /// residual and the outputs are unchanged.
  TopkResult select_with_feedback(const ConstVector& grad, const Vector& residual, std::size_t k,
                                  const IndexVector& out_index, const Vector& out_value) {
    if (residual.extent(0) != grad.extent(0)) return fail(TopkStatus::shape_mismatch);
    return run<true, false>(grad, residual, residual, k, out_index, out_value);
  }

  /// The one-read form: as above, with the new residual written to a second buffer,
  /// residual_out = acc with the selected entries set to 0, so that grad and residual_in are
  /// read once and residual_out written once (docs/select.md). residual_in is never written:
  /// on a non-ok status it still holds the residual (the caller keeps using it; residual_out
  /// then holds unspecified values, and the outputs are unchanged); on ok the caller uses
  /// residual_out from now on (swap the two buffers). residual_out may be residual_in itself
  /// (then this is the in-place form above); a partial overlap gives residual_overlap.
  TopkResult select_with_feedback(const ConstVector& grad, const ConstVector& residual_in,
                                  const Vector& residual_out, std::size_t k,
                                  const IndexVector& out_index, const Vector& out_value) {
    const std::size_t n = grad.extent(0);
    if (residual_in.extent(0) != n || residual_out.extent(0) != n)
      return fail(TopkStatus::shape_mismatch);
    if (residual_in.data() == residual_out.data())
      return run<true, false>(grad, residual_in, residual_out, k, out_index, out_value);
    const auto in = reinterpret_cast<std::uintptr_t>(residual_in.data());
    const auto out = reinterpret_cast<std::uintptr_t>(residual_out.data());
    if (n != 0 && in < out + n * sizeof(float) && out < in + n * sizeof(float))
      return fail(TopkStatus::residual_overlap);
    return run<true, true>(grad, residual_in, residual_out, k, out_index, out_value);
  }

 private:
  static TopkResult fail(TopkStatus s) {
    TopkResult r;
    r.status = s;
    return r;
  }

  /// Store: the out-of-place feedback form (residual_out differs from residual).
  template <bool Feedback, bool Store>
  TopkResult run(const ConstVector& a, const ConstVector& residual, const Vector& residual_out,
                 std::size_t k, const IndexVector& out_index, const Vector& out_value) {
    const std::size_t n = a.extent(0);
    if (n > max_n_) return fail(TopkStatus::n_exceeds_capacity);
    if (k > n) return fail(TopkStatus::k_exceeds_n);
    if (out_index.extent(0) < k || out_value.extent(0) < k)
      return fail(TopkStatus::output_too_small);
    TopkResult result;
    if (n == 0) return result;
    Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::select"));
    const detail::SelectSource<memory_space, Feedback> src{a, residual, residual_out};
    const detail::PickOutput<memory_space> out{out_index, out_value, state_, residual_out};
    if (n <= detail::select_small_n) {
      last_path_ = TopkPath::small;
      result = small<Feedback, Store>(src, k, out);
    } else if (k != 0 && sampled<Feedback, Store>(src, k, out, result)) {
      last_path_ = TopkPath::sampled;
    } else {
      last_path_ = k != 0 && sample_tried_ ? TopkPath::radix_fallback : TopkPath::radix;
      result = radix<Feedback>(src, k, out_index, out_value);
    }
    Kokkos::Profiling::popRegion();
    return result;
  }

  /// n <= select_small_n: one team does everything; one launch, one read-back. Store: the
  /// first pass writes acc to residual_out, the later ones read it there, and the pick
  /// zeroes the selected entries only.
  template <bool Feedback, bool Store>
  TopkResult small(const detail::SelectSource<memory_space, Feedback>& src, std::size_t k,
                   const detail::PickOutput<memory_space>& out) {
    using detail::PickResidual;
    const std::int64_t n = static_cast<std::int64_t>(src.a.extent(0));
    const auto need = static_cast<std::uint32_t>(k);
    if constexpr (Store) {
      using List = detail::AccList<memory_space>;
      const detail::SelectSource<memory_space, true> acc{src.a, src.residual, src.out};
      one_team(detail::SelectOneTeam<ExecSpace, List, PickResidual::selected,
                                     detail::OneTeamMode::small>{List{acc, n}, need, out,
                                                                 nonfinite_, cand_value_});
    } else {
      using List = detail::DirectList<memory_space, Feedback>;
      constexpr PickResidual w = Feedback ? PickResidual::all : PickResidual::none;
      one_team(detail::SelectOneTeam<ExecSpace, List, w, detail::OneTeamMode::small>{
          List{src, n}, need, out, nonfinite_, cand_value_});
    }
    Kokkos::deep_copy(exec_, nonfinite_host_, nonfinite_);
    detail::fence(exec_);
    TopkResult result;
    result.nonfinite = nonfinite_host_(0);
    if (result.nonfinite != 0) {
      result.status = TopkStatus::nonfinite_input;
    } else {
      result.selected = k;
    }
    return result;
  }

  /// The one-team kernel of a mode, labelled omgs::select::small | sample | candidates.
  template <class F>
  void one_team(const F& f) {
    constexpr detail::OneTeamMode mode = F::mode;
    Kokkos::parallel_for(
        mode == detail::OneTeamMode::small
            ? OMGS_LABEL("omgs::select::small")
            : (mode == detail::OneTeamMode::sample ? OMGS_LABEL("omgs::select::sample")
                                                   : OMGS_LABEL("omgs::select::candidates")),
        Kokkos::TeamPolicy<ExecSpace>(exec_, 1, Kokkos::AUTO)
            .set_scratch_size(0, Kokkos::PerTeam(detail::select_team_scratch_bytes<ExecSpace>())),
        f);
  }

  /// The sampled path (docs/select.md). Returns false, having written nothing, when it does
  /// not apply or its bracket missed (then the radix path runs); true when it finished
  /// (result: ok, or nonfinite_input with nothing written).
  template <bool Feedback, bool Store>
  bool sampled(const detail::SelectSource<memory_space, Feedback>& src, std::size_t k,
               const detail::PickOutput<memory_space>& out, TopkResult& result) {
    sample_tried_ = false;
    const std::int64_t n = static_cast<std::int64_t>(src.a.extent(0));
    const std::int64_t s = detail::select_sample_size(n);
    const std::int64_t stride = n / s;
    std::int64_t rank = detail::select_bound_rank(k, s, n);
    if (forced_rank_ > 0) rank = forced_rank_;
    if (rank >= s && forced_rank_ <= 0) return false;
    if (rank > s) rank = s;
    const double expect = static_cast<double>(rank) * static_cast<double>(n) / s;
    if (expect > 0.5 * static_cast<double>(cap_) && forced_rank_ <= 0) return false;
    sample_tried_ = true;
    // The sample: gathered to bucket_ by every thread, its bound found by one team.
    using Sample = detail::SampleList<memory_space, Feedback>;
    Kokkos::parallel_for(
        OMGS_LABEL("omgs::select::sample_gather"), detail::range_policy(exec_, 0, s),
        detail::SelectSampleGather<ExecSpace, Feedback>{Sample{src, s, stride}, bucket_});
    using Samples = detail::ValueList<memory_space>;
    one_team(detail::SelectOneTeam<ExecSpace, Samples, detail::PickResidual::none,
                                   detail::OneTeamMode::sample>{
        Samples{bucket_, s}, static_cast<std::uint32_t>(rank), out, nonfinite_, cand_value_});
    // The fused pass: teams of at least select_team_chunk_min entries, each with an equal
    // segment of the candidate buffer.
    std::int64_t league = (n + detail::select_team_chunk_min - 1) / detail::select_team_chunk_min;
    if (league > max_league_) league = max_league_;
    const std::int64_t chunk = (n + league - 1) / league;
    league = (n + chunk - 1) / chunk;
    const std::int64_t seg = static_cast<std::int64_t>(cap_) / league;
    detail::SelectBracketPass<ExecSpace, Feedback, Store> pass{
        src, state_, counts_, cand_index_, cand_value_, n, chunk, seg};
    Kokkos::parallel_for(
        OMGS_LABEL("omgs::select::bracket"),
        Kokkos::TeamPolicy<ExecSpace>(exec_, static_cast<int>(league), Kokkos::AUTO), pass);
    Kokkos::deep_copy(exec_, counts_host_, counts_);
    detail::fence(exec_);
    std::uint64_t m = 0, bad = 0;
    bool overflow = false;
    for (std::int64_t r = 0; r < league; ++r) {
      m += counts_host_(2 * r);
      bad += counts_host_(2 * r + 1);
      overflow = overflow || counts_host_(2 * r) > static_cast<std::uint32_t>(seg - 1);
    }
    result = TopkResult();
    if (bad != 0) {
      result.status = TopkStatus::nonfinite_input;
      result.nonfinite = bad;
      return true;
    }
    if (overflow || m < k) return false;  // the bracket missed: radix path
    using Cand = detail::CandidateList<memory_space>;
    one_team(detail::SelectOneTeam<ExecSpace, Cand, detail::PickResidual::none,
                                   detail::OneTeamMode::resolve>{
        Cand{counts_, cand_index_, cand_value_, static_cast<int>(league), seg},
        static_cast<std::uint32_t>(k), out, nonfinite_, bucket_});
    if (Store) {
      // The bracket pass wrote residual_out = acc; zero the selected entries.
      Kokkos::parallel_for(
          OMGS_LABEL("omgs::select::zero"),
          detail::range_policy(exec_, 0, static_cast<std::int64_t>(k)),
          detail::SelectZeroSelected<ExecSpace>{out.index, src.out, static_cast<std::int64_t>(k)});
    }
    if (Feedback && !Store) {
      Kokkos::parallel_for(
          OMGS_LABEL("omgs::select::residual"),
          Kokkos::TeamPolicy<ExecSpace>(exec_, static_cast<int>(league), Kokkos::AUTO),
          detail::SelectResidualPass<ExecSpace>{src.a, src.out, state_, n, chunk});
    }
    result.selected = k;
    return true;
  }

  /// The radix path (detail/select_radix.hpp).
  template <bool Feedback>
  TopkResult radix(const detail::SelectSource<memory_space, Feedback>& src, std::size_t k,
                   const IndexVector& out_index, const Vector& out_value) {
    TopkResult result;
    result.nonfinite =
        radix_.template run<Feedback>(exec_, max_league_, src, k, out_index, out_value);
    if (result.nonfinite != 0) {
      result.status = TopkStatus::nonfinite_input;
    } else {
      result.selected = k;
    }
    return result;
  }

  ExecSpace exec_;
  std::size_t max_n_ = 0, max_k_ = 0, cap_ = 0;
  int max_league_ = 1;
  Kokkos::View<std::uint64_t*, memory_space> nonfinite_;
  typename Kokkos::View<std::uint64_t*, memory_space>::HostMirror nonfinite_host_;
  IndexVector state_, cand_index_, counts_;
  typename IndexVector::HostMirror counts_host_;
  TopkPath last_path_ = TopkPath::none;
  bool sample_tried_ = false;
  std::int64_t forced_rank_ = 0;
  Vector cand_value_;
  Vector bucket_;  // the gathered sample, then the resolve's threshold bin (select_bucket_cap)
  detail::RadixPath<ExecSpace> radix_;
};

/// One-shot convenience: builds a TopkSelector for x (allocates) and selects. Bad arguments
/// (k > n, outputs shorter than k) throw omgs::Error; non-finite input is reported in the
/// result (status nonfinite_input, outputs unchanged). The outputs are complete on return
/// (this function fences exec). Use a TopkSelector on the hot path.
template <class ExecSpace>
TopkResult select_topk(
    const ExecSpace& exec, const Kokkos::View<const float*, typename ExecSpace::memory_space>& x,
    std::size_t k, const Kokkos::View<std::uint32_t*, typename ExecSpace::memory_space>& out_index,
    const Kokkos::View<float*, typename ExecSpace::memory_space>& out_value) {
  const std::size_t n = x.extent(0);
  if (k > n)
    throw Error("omgs::select_topk: k = " + std::to_string(k) +
                " exceeds n = " + std::to_string(n));
  if (out_index.extent(0) < k || out_value.extent(0) < k)
    throw Error("omgs::select_topk: outputs hold " + std::to_string(out_index.extent(0)) + " / " +
                std::to_string(out_value.extent(0)) +
                " entries, fewer than k = " + std::to_string(k));
  TopkSelector<ExecSpace> selector(n, k, 0, exec);
  const TopkResult r = selector.select(x, k, out_index, out_value);
  exec.fence();
  return r;
}

extern template class OMGS_EXPORT TopkSelector<Kokkos::DefaultExecutionSpace>;

}  // namespace omgs
