// Module select: exact top-k by magnitude on any Kokkos execution space, with the fused
// error-feedback form the runtime uses (acc = residual + grad, select from acc, the new
// residual is acc with the selected entries zeroed).
//
// Algorithm (docs/select.md has the full story): radix select on the 31-bit magnitude key
// (float bits & 0x7fffffff orders finite magnitudes as unsigned integers) in three digit
// levels of 11 + 11 + 9 bits.
//   pass 1 (full read): per-team histograms of the top 11 bits in scratch memory, merged
//          into one global histogram; non-finite entries are counted in the same pass.
//   pass 2 (full read, one parallel_scan): entries whose top digit is above the threshold
//          bucket are certainly selected and are written, in index order, to a buffer; the
//          entries of the threshold bucket (the candidates) are compacted, in index order,
//          into a small buffer; the feedback form writes the new residual here.
//   then, on the candidates only: one team resolves the last two digits (the exact
//          threshold key T and how many entries with key == T are taken, lowest index first),
//          a scan picks the selected candidates in index order, and a merge of the two
//          index-sorted lists writes the output (no per-element global atomics anywhere).
// When the threshold bucket holds more entries than the candidate buffer (e.g. all values
// equal) or k exceeds the selector's max_k, a slower path does the last two digits as full
// passes and writes the output with one full parallel_scan (up to four reads of the input).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include <omgs/detail/kokkos_helpers.hpp>
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
};

/// A short English name of the status ("ok", "non-finite input", ...).
OMGS_EXPORT const char* to_string(TopkStatus status) noexcept;

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

namespace detail {

/// Digit layout of the 31-bit magnitude key: 11 + 11 + 9 bits, most significant first.
constexpr int select_shift1 = 20;
constexpr int select_shift2 = 9;
constexpr int select_bins1 = 2048;
constexpr int select_bins2 = 2048;
constexpr int select_bins3 = 512;
/// Inputs below this size are handled by one team (one histogram, no merge).
constexpr std::size_t select_team_chunk_min = 16384;

KOKKOS_FORCEINLINE_FUNCTION std::uint32_t magnitude_key(float v) {
  // Type punning through a union is supported by every compiler Kokkos targets (GCC, Clang,
  // nvcc, hipcc, icpx); std::memcpy / bit_cast are not available in device code everywhere.
  union {
    float f;
    std::uint32_t u;
  } pun;
  pun.f = v;
  return pun.u & 0x7fffffffu;
}

/// +-Inf and NaN have all exponent bits set: key >= 0x7f800000.
KOKKOS_FORCEINLINE_FUNCTION bool key_is_nonfinite(std::uint32_t key) {
  return key >= 0x7f800000u;
}

/// Number of entries of the sorted view v[0, len) that are < value.
template <class View>
KOKKOS_INLINE_FUNCTION std::uint64_t count_less(const View& v, std::uint64_t len,
                                                std::uint32_t value) {
  std::uint64_t lo = 0, hi = len;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (v(mid) < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// The value of entry i: x(i), or residual(i) + grad(i) in the feedback form (a = grad).
template <class Mem, bool Feedback>
struct SelectSource {
  Kokkos::View<const float*, Mem> a;
  Kokkos::View<float*, Mem> residual;
  KOKKOS_FORCEINLINE_FUNCTION float operator()(std::int64_t i) const {
    if (Feedback) return residual(i) + a(i);
    return a(i);
  }
};

/// Histogram pass over the whole input: counts digit (key >> shift) & mask of the entries
/// whose key >> filter_shift equals filter_value (filter_shift == 32: every entry), one
/// scratch histogram per team, merged with one atomic per non-empty bin and team. Level 1
/// also counts non-finite entries.
template <class Exec, bool Feedback>
struct SelectHistogram {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  using ScratchU32 =
      Kokkos::View<std::uint32_t*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;

  SelectSource<Mem, Feedback> src;
  Kokkos::View<std::uint32_t*, Mem> hist;
  Kokkos::View<std::uint64_t*, Mem> nonfinite;
  std::int64_t n = 0;
  std::int64_t chunk = 0;
  int shift = 0;
  std::uint32_t mask = 0;
  int filter_shift = 32;
  std::uint32_t filter_value = 0;
  int bins = 0;

  KOKKOS_INLINE_FUNCTION bool keep(std::uint32_t key) const {
    return filter_shift >= 32 || (key >> filter_shift) == filter_value;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    ScratchU32 h(team.team_scratch(0), bins);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins), [&](const int b) { h(b) = 0; });
    team.team_barrier();
    const std::int64_t begin = static_cast<std::int64_t>(team.league_rank()) * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    std::uint64_t bad = 0;
    if (team.team_size() == 1) {
      // CPU backends run one thread per team: plain increments, no atomics.
      for (std::int64_t i = begin; i < end; ++i) {
        const std::uint32_t key = magnitude_key(src(i));
        bad += key_is_nonfinite(key) ? 1 : 0;
        if (keep(key)) ++h((key >> shift) & mask);
      }
    } else {
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, begin, end),
          [&](const std::int64_t i, std::uint64_t& nb) {
            const std::uint32_t key = magnitude_key(src(i));
            nb += key_is_nonfinite(key) ? 1 : 0;
            if (keep(key)) Kokkos::atomic_add(&h((key >> shift) & mask), std::uint32_t(1));
          },
          bad);
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins), [&](const int b) {
      if (h(b) != 0) Kokkos::atomic_add(&hist(b), h(b));
    });
    if (nonfinite.extent(0) > 0) {
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        if (bad != 0) Kokkos::atomic_add(&nonfinite(0), bad);
      });
    }
  }
};

/// Pass 2 of the fast path: one scan in index order writes the certainly selected entries
/// (top digit above the threshold bucket b1) to sure_*, and the threshold bucket's entries to
/// cand_*, both in index order. The feedback form writes residual = (sure ? 0 : acc).
/// Scan value: low 32 bits count sure entries, high 32 bits count candidates.
template <class Exec, bool Feedback>
struct SelectCompact {
  using Mem = typename Exec::memory_space;
  using value_type = std::uint64_t;
  SelectSource<Mem, Feedback> src;
  std::uint32_t b1 = 0;
  Kokkos::View<std::uint32_t*, Mem> sure_index, cand_index;
  Kokkos::View<float*, Mem> sure_value, cand_value;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, value_type& update,
                                         const bool final) const {
    const float v = src(i);
    const std::uint32_t digit = magnitude_key(v) >> select_shift1;
    const bool sure = digit > b1;
    const bool cand = digit == b1;
    if (final) {
      if (sure) {
        const std::uint64_t p = update & 0xffffffffu;
        sure_index(p) = static_cast<std::uint32_t>(i);
        sure_value(p) = v;
      } else if (cand) {
        const std::uint64_t p = update >> 32;
        cand_index(p) = static_cast<std::uint32_t>(i);
        cand_value(p) = v;
      }
      if (Feedback) src.residual(i) = sure ? 0.0f : v;
    }
    update += (static_cast<std::uint64_t>(cand) << 32) | static_cast<std::uint64_t>(sure);
  }
};

/// Finds, in the host histogram h[0, bins), the bucket b holding the k-th largest entry
/// (1 <= k <= total): above = sum of h[b+1 ..] < k <= above + h[b].
template <class HostView>
inline int find_bucket_host(const HostView& h, int bins, std::uint64_t k, std::uint64_t& above) {
  std::uint64_t cum = 0;
  for (int b = bins - 1; b >= 0; --b) {
    if (cum + h(b) >= k) {
      above = cum;
      return b;
    }
    cum += h(b);
  }
  above = cum;
  return 0;  // unreachable for 1 <= k <= total
}

/// One team resolves the last two digits over the m candidates (all of top digit b1):
/// writes state(0) = exact threshold key T and state(1) = t, the number of entries with
/// key == T to take (lowest indices first); k_rem = k - (entries above the bucket).
template <class Exec>
struct SelectResolveCandidates {
  using Mem = typename Exec::memory_space;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  using ScratchU32 =
      Kokkos::View<std::uint32_t*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  Kokkos::View<const float*, Mem> cand_value;
  Kokkos::View<std::uint32_t*, Mem> state;
  std::int64_t m = 0;
  std::uint32_t b1 = 0;
  std::uint32_t k_rem = 0;

  static std::size_t scratch_bytes() {
    return ScratchU32::shmem_size(select_bins2) + ScratchU32::shmem_size(select_bins3) +
           ScratchU32::shmem_size(4);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    ScratchU32 h2(team.team_scratch(0), select_bins2);
    ScratchU32 h3(team.team_scratch(0), select_bins3);
    ScratchU32 shared(team.team_scratch(0), 4);
    const bool serial = team.team_size() == 1;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, select_bins2), [&](const int b) {
      h2(b) = 0;
      if (b < select_bins3) h3(b) = 0;
    });
    team.team_barrier();
    if (serial) {
      for (std::int64_t j = 0; j < m; ++j)
        ++h2((magnitude_key(cand_value(j)) >> select_shift2) & 0x7ffu);
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m), [&](const std::int64_t j) {
        Kokkos::atomic_add(&h2((magnitude_key(cand_value(j)) >> select_shift2) & 0x7ffu),
                           std::uint32_t(1));
      });
    }
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      std::uint32_t cum = 0, b = select_bins2 - 1;
      for (int c = select_bins2 - 1; c >= 0; --c) {
        b = static_cast<std::uint32_t>(c);
        if (cum + h2(c) >= k_rem) break;
        cum += h2(c);
      }
      shared(0) = b;
      shared(1) = k_rem - cum;
    });
    team.team_barrier();
    const std::uint32_t b2 = shared(0);
    if (serial) {
      for (std::int64_t j = 0; j < m; ++j) {
        const std::uint32_t key = magnitude_key(cand_value(j));
        if (((key >> select_shift2) & 0x7ffu) == b2) ++h3(key & 0x1ffu);
      }
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m), [&](const std::int64_t j) {
        const std::uint32_t key = magnitude_key(cand_value(j));
        if (((key >> select_shift2) & 0x7ffu) == b2)
          Kokkos::atomic_add(&h3(key & 0x1ffu), std::uint32_t(1));
      });
    }
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      const std::uint32_t need = shared(1);
      std::uint32_t cum = 0, b = select_bins3 - 1;
      for (int c = select_bins3 - 1; c >= 0; --c) {
        b = static_cast<std::uint32_t>(c);
        if (cum + h3(c) >= need) break;
        cum += h3(c);
      }
      state(0) = (b1 << select_shift1) | (b2 << select_shift2) | b;
      state(1) = need - cum;
    });
  }
};

/// Selection scan against the exact threshold: key > T is taken, key == T is taken while
/// fewer than t ties were seen at lower indices. Scan value: low 32 bits count entries
/// above T, high 32 bits count ties; the output position is above + min(ties, t).
/// Over the candidates (FromState: T and t are read from state) it writes sel_*; over the
/// full input (slow path) it writes the outputs and, in the feedback form, the residual.
template <class Exec, bool Feedback, bool Candidates>
struct SelectFinalScan {
  using Mem = typename Exec::memory_space;
  using value_type = std::uint64_t;
  SelectSource<Mem, Feedback> src;                     // full input (slow path)
  Kokkos::View<const std::uint32_t*, Mem> cand_index;  // candidates (fast path)
  Kokkos::View<const float*, Mem> cand_value;
  Kokkos::View<const std::uint32_t*, Mem> state;
  std::uint32_t threshold = 0, ties = 0;  // slow path
  Kokkos::View<std::uint32_t*, Mem> out_index;
  Kokkos::View<float*, Mem> out_value;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j, value_type& update,
                                         const bool final) const {
    const float v = Candidates ? cand_value(j) : src(j);
    const std::uint32_t key = magnitude_key(v);
    const std::uint32_t T = Candidates ? state(0) : threshold;
    const bool above = key > T;
    const bool tie = key == T;
    if (final) {
      const std::uint64_t a = update & 0xffffffffu;
      const std::uint64_t seen = update >> 32;
      const std::uint64_t t = Candidates ? state(1) : ties;
      const bool take = above || (tie && seen < t);
      if (take) {
        const std::uint64_t p = a + (seen < t ? seen : t);
        out_index(p) = Candidates ? cand_index(j) : static_cast<std::uint32_t>(j);
        out_value(p) = v;
      }
      if (Feedback && !Candidates) src.residual(j) = take ? 0.0f : v;
    }
    update += (static_cast<std::uint64_t>(tie) << 32) | static_cast<std::uint64_t>(above);
  }
};

/// Merges the two index-sorted lists sure[0, n_sure) and sel[0, n_sel) into the output;
/// the feedback form zeroes the residual at the selected candidates (the sure entries were
/// zeroed by the compaction pass).
template <class Exec, bool Feedback>
struct SelectMerge {
  using Mem = typename Exec::memory_space;
  Kokkos::View<const std::uint32_t*, Mem> sure_index, sel_index;
  Kokkos::View<const float*, Mem> sure_value, sel_value;
  std::uint64_t n_sure = 0, n_sel = 0;
  Kokkos::View<std::uint32_t*, Mem> out_index;
  Kokkos::View<float*, Mem> out_value;
  Kokkos::View<float*, Mem> residual;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t jj) const {
    const std::uint64_t j = static_cast<std::uint64_t>(jj);
    if (j < n_sure) {
      const std::uint32_t idx = sure_index(j);
      const std::uint64_t p = j + count_less(sel_index, n_sel, idx);
      out_index(p) = idx;
      out_value(p) = sure_value(j);
    } else {
      const std::uint64_t s = j - n_sure;
      const std::uint32_t idx = sel_index(s);
      const std::uint64_t p = s + count_less(sure_index, n_sure, idx);
      out_index(p) = idx;
      out_value(p) = sel_value(s);
      if (Feedback) residual(idx) = 0.0f;
    }
  }
};

/// k == 0 in the feedback form: residual = residual + grad, nothing selected.
template <class Exec>
struct SelectAccumulate {
  using Mem = typename Exec::memory_space;
  Kokkos::View<const float*, Mem> grad;
  Kokkos::View<float*, Mem> residual;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    residual(i) = residual(i) + grad(i);
  }
};

}  // namespace detail

/// Reusable top-k selector for one execution space. All work buffers are allocated by the
/// constructor (sized from the largest n, max_n) and reused: select() and
/// select_with_feedback() never allocate and never throw; they return a TopkResult.
///
/// Kernels are enqueued on the execution space instance given at construction. The call
/// synchronizes once (to read the first histogram back to the host) and, on the slow path,
/// twice more; the outputs are complete after exec.fence() (the call itself does not fence
/// at the end). Not thread-safe: one selector per thread of control.
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
  /// Memory: 8 * (max_k + 2 * candidate_capacity) bytes plus ~10 KiB. Throws omgs::Error
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
    hist_ = Kokkos::View<std::uint32_t*, memory_space>(alloc("omgs::select::hist"),
                                                       detail::select_bins1);
    hist_host_ = Kokkos::create_mirror_view(hist_);
    nonfinite_ = Kokkos::View<std::uint64_t*, memory_space>(alloc("omgs::select::nonfinite"), 1);
    nonfinite_host_ = Kokkos::create_mirror_view(nonfinite_);
    state_ = IndexVector(alloc("omgs::select::state"), 4);
    sure_index_ = IndexVector(alloc("omgs::select::sure_index"), max_k_);
    sure_value_ = Vector(alloc("omgs::select::sure_value"), max_k_);
    cand_index_ = IndexVector(alloc("omgs::select::cand_index"), cap_);
    cand_value_ = Vector(alloc("omgs::select::cand_value"), cap_);
    sel_index_ = IndexVector(alloc("omgs::select::sel_index"), sel);
    sel_value_ = Vector(alloc("omgs::select::sel_value"), sel);
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
  }

  std::size_t max_n() const noexcept { return max_n_; }
  std::size_t max_k() const noexcept { return max_k_; }
  std::size_t candidate_capacity() const noexcept { return cap_; }
  const ExecSpace& execution_space_instance() const noexcept { return exec_; }

  /// Top k of x by magnitude: out_index[0, k) ascending indices (relative to x), out_value
  /// the signed values. Among equal magnitudes the lower index wins.
  TopkResult select(const ConstVector& x, std::size_t k, const IndexVector& out_index,
                    const Vector& out_value) {
    return run<false>(x, Vector(), k, out_index, out_value);
  }

  /// Fused error feedback: acc = residual + grad (float add, per element), top k of acc as in
  /// select(), and residual = acc with the selected entries set to 0. On any non-ok status
  /// residual and the outputs are unchanged.
  TopkResult select_with_feedback(const ConstVector& grad, const Vector& residual, std::size_t k,
                                  const IndexVector& out_index, const Vector& out_value) {
    if (residual.extent(0) != grad.extent(0)) return fail(TopkStatus::shape_mismatch);
    return run<true>(grad, residual, k, out_index, out_value);
  }

 private:
  static TopkResult fail(TopkStatus s) {
    TopkResult r;
    r.status = s;
    return r;
  }

  template <bool Feedback>
  TopkResult run(const ConstVector& a, const Vector& residual, std::size_t k,
                 const IndexVector& out_index, const Vector& out_value) {
    const std::size_t n = a.extent(0);
    if (n > max_n_) return fail(TopkStatus::n_exceeds_capacity);
    if (k > n) return fail(TopkStatus::k_exceeds_n);
    if (out_index.extent(0) < k || out_value.extent(0) < k)
      return fail(TopkStatus::output_too_small);
    TopkResult result;
    if (n == 0) return result;
    Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::select"));
    const auto policy = [this](std::int64_t b, std::int64_t e) {
      return detail::range_policy(exec_, b, e);
    };
    const detail::SelectSource<memory_space, Feedback> src{a, residual};
    const std::int64_t sn = static_cast<std::int64_t>(n);

    // Pass 1: histogram of the top digit, and the non-finite count.
    std::uint64_t above = 0;
    const std::uint32_t b1 = static_cast<std::uint32_t>(
        histogram<Feedback>(src, detail::select_shift1, 0x7ffu, 32, 0, detail::select_bins1, true,
                            k == 0 ? 1 : k, above));
    result.nonfinite = nonfinite_host_(0);
    if (result.nonfinite != 0) {
      result.status = TopkStatus::nonfinite_input;
      Kokkos::Profiling::popRegion();
      return result;
    }
    if (k == 0) {
      if (Feedback) {
        Kokkos::parallel_for(OMGS_LABEL("omgs::select::accumulate"), policy(0, sn),
                             detail::SelectAccumulate<ExecSpace>{a, residual});
      }
      Kokkos::Profiling::popRegion();
      return result;
    }
    const std::uint64_t k_rem = k - above;
    const std::uint64_t m = hist_host_(b1);

    if (m <= cap_ && k <= max_k_) {
      // Fast path: compact, resolve on the candidates, merge.
      detail::SelectCompact<ExecSpace, Feedback> compact{src,         b1,          sure_index_,
                                                         cand_index_, sure_value_, cand_value_};
      Kokkos::parallel_scan(OMGS_LABEL("omgs::select::compact"), policy(0, sn), compact);
      using Resolve = detail::SelectResolveCandidates<ExecSpace>;
      Resolve resolve{cand_value_, state_, static_cast<std::int64_t>(m), b1,
                      static_cast<std::uint32_t>(k_rem)};
      Kokkos::parallel_for(OMGS_LABEL("omgs::select::resolve"),
                           Kokkos::TeamPolicy<ExecSpace>(exec_, 1, Kokkos::AUTO)
                               .set_scratch_size(0, Kokkos::PerTeam(Resolve::scratch_bytes())),
                           resolve);
      detail::SelectFinalScan<ExecSpace, Feedback, true> pick;
      pick.cand_index = cand_index_;
      pick.cand_value = cand_value_;
      pick.state = state_;
      pick.out_index = sel_index_;
      pick.out_value = sel_value_;
      Kokkos::parallel_scan(OMGS_LABEL("omgs::select::pick"),
                            policy(0, static_cast<std::int64_t>(m)), pick);
      detail::SelectMerge<ExecSpace, Feedback> merge{sure_index_, sel_index_, sure_value_,
                                                     sel_value_,  above,      k_rem,
                                                     out_index,   out_value,  residual};
      Kokkos::parallel_for(OMGS_LABEL("omgs::select::merge"),
                           policy(0, static_cast<std::int64_t>(k)), merge);
    } else {
      // Slow path: the last two digits as full passes, then one full output scan.
      std::uint64_t above2 = 0, above3 = 0;
      const std::uint32_t b2 = static_cast<std::uint32_t>(
          histogram<Feedback>(src, detail::select_shift2, 0x7ffu, detail::select_shift1, b1,
                              detail::select_bins2, false, k_rem, above2));
      const std::uint64_t k_rem2 = k_rem - above2;
      const std::uint32_t prefix = (b1 << 11) | b2;
      const std::uint32_t b3 = static_cast<std::uint32_t>(
          histogram<Feedback>(src, 0, 0x1ffu, detail::select_shift2, prefix, detail::select_bins3,
                              false, k_rem2, above3));
      detail::SelectFinalScan<ExecSpace, Feedback, false> fin;
      fin.src = src;
      fin.threshold = (prefix << detail::select_shift2) | b3;
      fin.ties = static_cast<std::uint32_t>(k_rem2 - above3);
      fin.out_index = out_index;
      fin.out_value = out_value;
      Kokkos::parallel_scan(OMGS_LABEL("omgs::select::output"), policy(0, sn), fin);
    }
    result.selected = k;
    Kokkos::Profiling::popRegion();
    return result;
  }

  /// Runs one histogram pass, reads it back (synchronizes) and returns the bucket of the
  /// k-th largest entry among the filtered ones; `above` receives the count above it.
  template <bool Feedback>
  int histogram(const detail::SelectSource<memory_space, Feedback>& src, int shift,
                std::uint32_t mask, int filter_shift, std::uint32_t filter_value, int bins,
                bool count_nonfinite, std::uint64_t k, std::uint64_t& above) {
    const std::size_t n = src.a.extent(0);
    std::size_t league = (n + detail::select_team_chunk_min - 1) / detail::select_team_chunk_min;
    if (league > static_cast<std::size_t>(max_league_)) league = max_league_;
    if (league < 1) league = 1;
    const std::size_t chunk = (n + league - 1) / league;
    detail::fill_zero(exec_, hist_);
    if (count_nonfinite) detail::fill_zero(exec_, nonfinite_);
    using Hist = detail::SelectHistogram<ExecSpace, Feedback>;
    Hist f;
    f.src = src;
    f.hist = hist_;
    if (count_nonfinite) f.nonfinite = nonfinite_;
    f.n = static_cast<std::int64_t>(n);
    f.chunk = static_cast<std::int64_t>(chunk);
    f.shift = shift;
    f.mask = mask;
    f.filter_shift = filter_shift;
    f.filter_value = filter_value;
    f.bins = bins;
    Kokkos::parallel_for(
        OMGS_LABEL("omgs::select::histogram"),
        Kokkos::TeamPolicy<ExecSpace>(exec_, static_cast<int>(league), Kokkos::AUTO)
            .set_scratch_size(0, Kokkos::PerTeam(Hist::ScratchU32::shmem_size(bins))),
        f);
    Kokkos::deep_copy(exec_, hist_host_, hist_);
    if (count_nonfinite) Kokkos::deep_copy(exec_, nonfinite_host_, nonfinite_);
    detail::fence(exec_);
    if (count_nonfinite && nonfinite_host_(0) != 0) return 0;
    return detail::find_bucket_host(hist_host_, bins, k, above);
  }

  ExecSpace exec_;
  std::size_t max_n_ = 0, max_k_ = 0, cap_ = 0;
  int max_league_ = 1;
  Kokkos::View<std::uint32_t*, memory_space> hist_;
  typename Kokkos::View<std::uint32_t*, memory_space>::HostMirror hist_host_;
  Kokkos::View<std::uint64_t*, memory_space> nonfinite_;
  typename Kokkos::View<std::uint64_t*, memory_space>::HostMirror nonfinite_host_;
  IndexVector state_, sure_index_, cand_index_, sel_index_;
  Vector sure_value_, cand_value_, sel_value_;
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
  if (k > n) {
    throw Error("omgs::select_topk: k = " + std::to_string(k) +
                " exceeds n = " + std::to_string(n));
  }
  if (out_index.extent(0) < k || out_value.extent(0) < k) {
    throw Error("omgs::select_topk: outputs hold " + std::to_string(out_index.extent(0)) + " / " +
                std::to_string(out_value.extent(0)) +
                " entries, fewer than k = " + std::to_string(k));
  }
  TopkSelector<ExecSpace> selector(n, k, 0, exec);
  const TopkResult r = selector.select(x, k, out_index, out_value);
  exec.fence();
  return r;
}

extern template class OMGS_EXPORT TopkSelector<Kokkos::DefaultExecutionSpace>;

}  // namespace omgs
