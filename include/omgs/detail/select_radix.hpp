// Internal part of module select: the radix path (docs/select.md), run by TopkSelector when
// k is too large for the sampled path's candidate buffer, or as the fallback when the
// sampled bracket missed. Full histogram passes over the input, then either compaction of
// the threshold bucket (fast path) or two more histogram passes and one output scan (slow
// path). Kernels in detail/select_radix_kernels.hpp. Not part of the public API.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include <omgs/detail/kokkos_helpers.hpp>
#include <omgs/detail/select_radix_kernels.hpp>
#include <omgs/detail/select_source.hpp>

namespace omgs {
namespace detail {

template <class ExecSpace>
class RadixPath {
 public:
  using Mem = typename ExecSpace::memory_space;
  using Vector = Kokkos::View<float*, Mem>;
  using IndexVector = Kokkos::View<std::uint32_t*, Mem>;
  using CountVector = Kokkos::View<std::uint64_t*, Mem>;

  /// The selector's views this path shares with the other paths.
  struct Shared {
    IndexVector state, cand_index;
    Vector cand_value;
    CountVector nonfinite;
    typename CountVector::HostMirror nonfinite_host;
  };

  RadixPath() = default;

  /// Allocates the path's own buffers: the histogram and its host mirror, max_k sure
  /// entries, sel selected candidates. cap: the shared candidate buffer's size.
  RadixPath(const Shared& shared, std::size_t max_k, std::size_t cap, std::size_t sel)
      : shared_(shared), max_k_(max_k), cap_(cap) {
    const auto alloc = [](const char* label) { return Kokkos::view_alloc(std::string(label)); };
    hist_ = IndexVector(alloc("omgs::select::hist"), select_bins1);
    hist_host_ = Kokkos::create_mirror_view(hist_);
    sure_index_ = IndexVector(alloc("omgs::select::sure_index"), max_k);
    sure_value_ = Vector(alloc("omgs::select::sure_value"), max_k);
    sel_index_ = IndexVector(alloc("omgs::select::sel_index"), sel);
    sel_value_ = Vector(alloc("omgs::select::sel_value"), sel);
  }

  /// Selects the top k of src into out_index / out_value (and the residual of the feedback
  /// form) with at most max_league teams per histogram pass. Returns the number of
  /// non-finite entries: when it is > 0 nothing was written.
  template <bool Feedback>
  std::uint64_t run(const ExecSpace& exec, int max_league, const SelectSource<Mem, Feedback>& src,
                    std::size_t k, const IndexVector& out_index, const Vector& out_value) {
    const std::int64_t sn = static_cast<std::int64_t>(src.a.extent(0));
    const auto policy = [&exec](std::int64_t b, std::int64_t e) {
      return range_policy(exec, b, e);
    };

    // Pass 1: histogram of the top digit, and the non-finite count.
    std::uint64_t above = 0;
    const std::uint32_t b1 = static_cast<std::uint32_t>(
        histogram<Feedback>(exec, max_league, src, select_shift1, 0x7ffu, 32, 0, select_bins1, true,
                            k == 0 ? 1 : k, above));
    const std::uint64_t nonfinite = shared_.nonfinite_host(0);
    if (nonfinite != 0) return nonfinite;
    if (k == 0) {
      if (Feedback) {
        Kokkos::parallel_for(OMGS_LABEL("omgs::select::accumulate"), policy(0, sn),
                             SelectAccumulate<ExecSpace>{{src.a, src.residual, src.out}});
      }
      return 0;
    }
    const std::uint64_t k_rem = k - above;
    const std::uint64_t m = hist_host_(b1);
    if (m <= cap_ && k <= max_k_) {
      compact_and_merge<Feedback>(exec, src, b1, m, k, above, k_rem, out_index, out_value);
      return 0;
    }
    // Slow path: the last two digits as full passes, then one full output scan.
    std::uint64_t above2 = 0, above3 = 0;
    const std::uint32_t b2 = static_cast<std::uint32_t>(
        histogram<Feedback>(exec, max_league, src, select_shift2, 0x7ffu, select_shift1, b1,
                            select_bins2, false, k_rem, above2));
    const std::uint64_t k_rem2 = k_rem - above2;
    const std::uint32_t prefix = (b1 << 11) | b2;
    const std::uint32_t b3 = static_cast<std::uint32_t>(
        histogram<Feedback>(exec, max_league, src, 0, 0x1ffu, select_shift2, prefix, select_bins3,
                            false, k_rem2, above3));
    SelectFinalScan<ExecSpace, Feedback, false> fin;
    fin.src = src;
    fin.threshold = (prefix << select_shift2) | b3;
    fin.ties = static_cast<std::uint32_t>(k_rem2 - above3);
    fin.out_index = out_index;
    fin.out_value = out_value;
    Kokkos::parallel_scan(OMGS_LABEL("omgs::select::output"), policy(0, sn), fin);
    return 0;
  }

 private:
  /// Fast path: compact the m entries of top digit b1 (and the sure ones above it), resolve
  /// the exact threshold on them, pick and merge with the sure entries.
  template <bool Feedback>
  void compact_and_merge(const ExecSpace& exec, const SelectSource<Mem, Feedback>& src,
                         std::uint32_t b1, std::uint64_t m, std::size_t k, std::uint64_t above,
                         std::uint64_t k_rem, const IndexVector& out_index,
                         const Vector& out_value) {
    const std::int64_t sn = static_cast<std::int64_t>(src.a.extent(0));
    SelectCompact<ExecSpace, Feedback> compact{
        src, b1, sure_index_, shared_.cand_index, sure_value_, shared_.cand_value};
    Kokkos::parallel_scan(OMGS_LABEL("omgs::select::compact"), range_policy(exec, 0, sn), compact);
    using Resolve = SelectResolveCandidates<ExecSpace>;
    Resolve resolve{shared_.cand_value, shared_.state, static_cast<std::int64_t>(m), b1,
                    static_cast<std::uint32_t>(k_rem)};
    Kokkos::parallel_for(OMGS_LABEL("omgs::select::resolve"),
                         Kokkos::TeamPolicy<ExecSpace>(exec, 1, Kokkos::AUTO)
                             .set_scratch_size(0, Kokkos::PerTeam(Resolve::scratch_bytes())),
                         resolve);
    SelectFinalScan<ExecSpace, Feedback, true> pick;
    pick.cand_index = shared_.cand_index;
    pick.cand_value = shared_.cand_value;
    pick.state = shared_.state;
    pick.out_index = sel_index_;
    pick.out_value = sel_value_;
    Kokkos::parallel_scan(OMGS_LABEL("omgs::select::pick"),
                          range_policy(exec, 0, static_cast<std::int64_t>(m)), pick);
    SelectMerge<ExecSpace, Feedback> merge{sure_index_, sel_index_, sure_value_, sel_value_, above,
                                           k_rem,       out_index,  out_value,   src.out};
    Kokkos::parallel_for(OMGS_LABEL("omgs::select::merge"),
                         range_policy(exec, 0, static_cast<std::int64_t>(k)), merge);
  }

  /// Runs one histogram pass, reads it back (synchronizes) and returns the bucket of the
  /// k-th largest entry among the filtered ones; `above` receives the count above it.
  template <bool Feedback>
  int histogram(const ExecSpace& exec, int max_league, const SelectSource<Mem, Feedback>& src,
                int shift, std::uint32_t mask, int filter_shift, std::uint32_t filter_value,
                int bins, bool count_nonfinite, std::uint64_t k, std::uint64_t& above) {
    const std::size_t n = src.a.extent(0);
    std::size_t league = (n + select_team_chunk_min - 1) / select_team_chunk_min;
    if (league > static_cast<std::size_t>(max_league)) league = max_league;
    if (league < 1) league = 1;
    const std::size_t chunk = (n + league - 1) / league;
    fill_zero(exec, hist_);
    if (count_nonfinite) fill_zero(exec, shared_.nonfinite);
    using Hist = SelectHistogram<ExecSpace, Feedback>;
    Hist f;
    f.src = src;
    f.hist = hist_;
    if (count_nonfinite) f.nonfinite = shared_.nonfinite;
    f.n = static_cast<std::int64_t>(n);
    f.chunk = static_cast<std::int64_t>(chunk);
    f.shift = shift;
    f.mask = mask;
    f.filter_shift = filter_shift;
    f.filter_value = filter_value;
    f.bins = bins;
    Kokkos::parallel_for(
        OMGS_LABEL("omgs::select::histogram"),
        Kokkos::TeamPolicy<ExecSpace>(exec, static_cast<int>(league), Kokkos::AUTO)
            .set_scratch_size(0, Kokkos::PerTeam(Hist::ScratchU32::shmem_size(bins))),
        f);
    Kokkos::deep_copy(exec, hist_host_, hist_);
    if (count_nonfinite) Kokkos::deep_copy(exec, shared_.nonfinite_host, shared_.nonfinite);
    fence(exec);
    if (count_nonfinite && shared_.nonfinite_host(0) != 0) return 0;
    return find_bucket_host(hist_host_, bins, k, above);
  }

  Shared shared_;
  std::size_t max_k_ = 0, cap_ = 0;
  IndexVector hist_;
  typename IndexVector::HostMirror hist_host_;
  IndexVector sure_index_, sel_index_;
  Vector sure_value_, sel_value_;
};

}  // namespace detail
}  // namespace omgs
