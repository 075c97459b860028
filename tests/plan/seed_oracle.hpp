// A literal, O(L^2) transcription of the seed's _generate_groups_mgs (shared/seed), kept in
// the tests only: the library's incremental MGS must give the same groups on any input.
// Arrays and recomputations are exactly those of the seed, including the full taoc pass
// after every merge.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs_test {

// Returns groups as lists of layer indices in the seed's order.
inline std::vector<std::vector<std::size_t>> seed_mgs(const std::vector<omgs::LayerSpec>& layers,
                                                      const omgs::PerfModel& m, int P, double d) {
  using V = std::vector<double>;
  const std::size_t L = layers.size();
  auto topk = [&](std::uint64_t n) { return m.topk_s(n); };
  auto ag = [&](std::uint64_t n) { return m.allgather_s(n, P, d); };
  auto sparse_backward = [&](const V& tb, const std::vector<std::uint64_t>& sizes, std::size_t n,
                             double start, V& taob, V& taos, V& ts) {
    taos.assign(n, start);
    ts.resize(n);
    for (std::size_t i = 0; i < n; ++i) ts[i] = topk(sizes[i]);
    taob.assign(n, start);
    taob[n - 1] = start;
    taos[n - 1] = taob[n - 1] + tb[n - 1];
    for (std::size_t l = n - 1; l-- > 0;) {
      taob[l] = taos[l + 1] + ts[l + 1];
      taos[l] = taob[l] + tb[l];
    }
  };
  auto comm_start = [&](const V& ts, const V& taos, const std::vector<std::uint64_t>& sizes,
                        std::size_t n, V& taoc, V& tc) {
    taoc.assign(n, 0.0);
    tc.resize(n);
    for (std::size_t i = 0; i < n; ++i) tc[i] = ag(sizes[i]);
    taoc[n - 1] = taos[n - 1] + ts[n - 1];
    for (std::size_t l = n - 1; l-- > 0;)
      taoc[l] = std::max(taoc[l + 1] + tc[l + 1], taos[l] + ts[l]);
  };
  std::vector<std::uint64_t> p(L);
  V tb(L);
  for (std::size_t i = 0; i < L; ++i) {
    p[i] = layers[i].numel;
    tb[i] = layers[i].backward_s;
  }
  V taob, taos, ts, taoc, tc;
  sparse_backward(tb, p, L, 0.0, taob, taos, ts);
  comm_start(ts, taos, p, L, taoc, tc);
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> group{L - 1};
  for (std::size_t l = L - 2; L >= 3 && l >= 1; --l) {
    group.push_back(l);
    const double tw = tb[l - 1] + topk(p[l] + p[l - 1]) - topk(p[l]) - topk(p[l - 1]) -
                      (taoc[l] - (taos[l] + ts[l]));
    const double tsave = ag(p[l]) + ag(p[l - 1]) - ag(p[l] + p[l - 1]);
    if (tw < tsave) {
      tb[l - 1] += tb[l];
      tb[l] = 0;
      p[l - 1] = p[l - 1] + p[l];
      p[l] = 0;
      tc[l - 1] = ag(p[l - 1]);
      tc[l] = 0;
      ts[l - 1] = topk(p[l - 1]);
      ts[l] = 0;
      V tb_head(tb.begin(), tb.begin() + static_cast<std::ptrdiff_t>(l));
      std::vector<std::uint64_t> p_head(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(l));
      V taob2, taos2, ts2;
      sparse_backward(tb_head, p_head, l, taob[l] + tb[l], taob2, taos2, ts2);
      std::copy(taob2.begin(), taob2.end(), taob.begin());
      std::copy(taos2.begin(), taos2.end(), taos.begin());
      comm_start(ts, taos, p, L, taoc, tc);
    } else {
      groups.push_back(group);
      group.clear();
    }
    if (l == 1) break;
  }
  group.push_back(0);  // L == 1 lists layer 0 twice, as the seed does
  groups.push_back(group);
  return groups;
}

}  // namespace omgs_test
