// The examples' dense baselines (examples/dense_baseline.hpp): buckets filled in backward
// order, the allreduce variant every rank agrees on, and DenseExchange's average, whether
// driven by iterate() or by begin() / ready() / finish() as omgs-train-mlp's backward does.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "bucket_progress.hpp"
#include "dense_baseline.hpp"
#include "omgs_catch.hpp"

using omgs_examples::Bucket;
using omgs_examples::DenseExchange;

namespace {

/// This rank and the number of ranks of MPI_COMM_WORLD.
struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

/// Rank r's gradient of layer l, element i.
float value(int r, std::size_t l, std::size_t i) {
  return static_cast<float>(r + 1) * static_cast<float>(l + 1) + 0.25f * static_cast<float>(i);
}

/// Its mean over `size` ranks.
float mean_value(int size, std::size_t l, std::size_t i) {
  double s = 0;
  for (int r = 0; r < size; ++r) s += value(r, l, i);
  return static_cast<float>(s / size);
}

void write(const omgs::GradientView& slot, int r, std::size_t l) {
  auto h = Kokkos::create_mirror_view(slot);
  for (std::size_t i = 0; i < h.extent(0); ++i) h(i) = value(r, l, i);
  Kokkos::deep_copy(slot, h);
}

/// The flat buffer against the mean, layer by layer.
void check_mean(const DenseExchange& ex, const std::vector<std::uint64_t>& numel) {
  auto h = Kokkos::create_mirror_view(ex.flat());
  Kokkos::deep_copy(h, ex.flat());
  const std::vector<float> averaged = ex.averaged();
  REQUIRE(averaged.size() == h.extent(0));
  std::size_t at = 0;
  for (std::size_t l = 0; l < numel.size(); ++l)
    for (std::size_t i = 0; i < numel[l]; ++i, ++at) {
      REQUIRE(h(at) == Approx(mean_value(World().size, l, i)));
      REQUIRE(averaged[at] == h(at));
    }
}

const std::vector<std::uint64_t> numel = {10, 20, 30, 40};

}  // namespace

TEST_CASE("make_buckets fills from the last layer, closing a bucket once it is full") {
  // 200 bytes = 50 floats: 40 + 30 reach it, then 20 + 10 (the first layer closes the last).
  const std::vector<Bucket> b = omgs_examples::make_buckets(numel, 200.0);
  REQUIRE(b.size() == 2u);
  CHECK((b[0].begin == 2 && b[0].end == 4));
  CHECK((b[1].begin == 0 && b[1].end == 2));
  const std::vector<Bucket> per_layer = omgs_examples::make_buckets(numel, 0.0);
  REQUIRE(per_layer.size() == 4u);
  for (std::size_t k = 0; k < 4; ++k)
    CHECK((per_layer[k].begin == 3 - k && per_layer[k].end == 4 - k));
  const std::vector<Bucket> one = omgs_examples::make_buckets(numel, 1e9);
  REQUIRE(one.size() == 1u);
  CHECK((one[0].begin == 0 && one[0].end == 4));
  // A layer over the size closes the bucket it joins: alone only when the bucket was empty.
  const std::vector<Bucket> big = omgs_examples::make_buckets({1000, 1, 1000}, 8.0);
  REQUIRE(big.size() == 2u);
  CHECK((big[0].begin == 2 && big[0].end == 3));
  CHECK((big[1].begin == 0 && big[1].end == 2));
  CHECK_THROWS_AS(omgs_examples::make_buckets({}, 100.0), omgs::Error);
}

TEST_CASE("make_buckets closes the first bucket early, as DDP's 1 MiB first bucket") {
  // First cap 100 B: layer 3 (160 B) alone; then 30 + 20 floats reach 200 B; then layer 0.
  const std::vector<Bucket> b = omgs_examples::make_buckets(numel, 200.0, 100.0);
  REQUIRE(b.size() == 3u);
  CHECK((b[0].begin == 3 && b[0].end == 4));
  CHECK((b[1].begin == 1 && b[1].end == 3));
  CHECK((b[2].begin == 0 && b[2].end == 1));
  // A first cap above the bucket size changes nothing.
  const std::vector<Bucket> same = omgs_examples::make_buckets(numel, 200.0, 1e9);
  REQUIRE(same.size() == 2u);
  CHECK((same[0].begin == 2 && same[0].end == 4));
  // make_dense_exchange uses DDP's cap: two layers of 1.2 MB make two 25 MB-class buckets.
  const DenseExchange ex =
      omgs_examples::make_dense_exchange(MPI_COMM_WORLD, {300000, 300000}, 25.0, 1);
  CHECK(ex.num_buckets() == 2u);
}

TEST_CASE("choose_allreduce: every rank makes the same choice") {
  omgs::AllreduceFormChoice c;
  const omgs_examples::AllreduceVariant v =
      omgs_examples::choose_allreduce(MPI_COMM_WORLD, 1000, 2, &c);
  const double in_place_s = c.median_s[0], separate_s = c.median_s[1], blocking_s = c.median_s[2];
  CHECK(in_place_s >= 0);
  CHECK(separate_s >= 0);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  CHECK(v.progress_thread == (level == MPI_THREAD_MULTIPLE));
  // The blocking form is timed only where a progress thread can call it, and wins only if
  // every non-blocking candidate (the two forms, any MPI_T setting) is over 10% slower
  // (blocking_margin in src/comm/allreduce_form.cpp).
  CHECK(std::isnan(blocking_s) == !v.progress_thread);
  double nonblocking_s = std::min(in_place_s, separate_s);
  for (const double s : c.setting_median_s)
    if (!std::isnan(s)) nonblocking_s = std::min(nonblocking_s, s);
  CHECK(v.blocking == (v.progress_thread && nonblocking_s > blocking_s * 1.10));
  CHECK(v.in_place == (!v.blocking && in_place_s <= separate_s));
  int form = v.blocking ? 2 : v.in_place ? 1 : 0, form_lo = 0, form_hi = 0;
  MPI_Allreduce(&form, &form_lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&form, &form_hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(form_lo == form_hi);
  CHECK_THAT(v.describe(),
             Catch::EndsWith(v.progress_thread ? "progress thread" : "progressed inline"));
  CHECK_THAT(v.describe(), Catch::Contains(v.blocking   ? "MPI_Allreduce (blocking) separate-buf"
                                           : v.in_place ? "MPI_Iallreduce in-place"
                                                        : "MPI_Iallreduce separate-buf"));
}

TEST_CASE("DenseExchange averages over ranks, driven either way") {
  const int r = World().rank;
  for (const double bucket_mb : {0.0, 0.0002, 1.0})  // per layer, 200 B (2 buckets), one
    for (const bool in_place : {true, false})
      for (const int driver : {0, 1, 2}) {  // inline, thread, thread with blocking MPI_Allreduce
        const bool thread = driver > 0;
        INFO("bucket_mb " << bucket_mb << ", in place " << in_place << ", driver " << driver);
        DenseExchange ex(MPI_COMM_WORLD, numel, omgs_examples::make_buckets(numel, bucket_mb * 1e6),
                         omgs_examples::AllreduceVariant{in_place, thread, driver == 2});
        CHECK(ex.num_buckets() == (bucket_mb == 0.0 ? 4u : bucket_mb < 1 ? 2u : 1u));
        CHECK(ex.variant().in_place == in_place);
        for (int it = 0; it < 2; ++it) {  // reused across iterations
          ex.begin();
          for (std::size_t l = numel.size(); l-- > 0;) {
            REQUIRE(ex.gradient(l).extent(0) == numel[l]);
            write(ex.gradient(l), r, l);
            ex.ready(l);
          }
          const omgs_examples::DenseIteration d = ex.finish();
          CHECK(d.iteration_s >= d.wait_s);
          CHECK(d.wait_s >= 0);
          check_mean(ex, numel);
        }
        const std::vector<float> by_hand = ex.averaged();
        ex.iterate([r](std::size_t l, const omgs::GradientView& slot) { write(slot, r, l); });
        check_mean(ex, numel);
        CHECK(omgs_examples::max_relative_difference(by_hand, ex.averaged()) == 0.0);
      }
}

TEST_CASE("DenseExchange: a blocking allreduce needs the progress thread") {
  const auto buckets = omgs_examples::make_buckets(numel, 0.0);
  for (const bool in_place : {true, false})
    CHECK_THROWS_WITH(DenseExchange(MPI_COMM_WORLD, numel, buckets,
                                    omgs_examples::AllreduceVariant{in_place, false, true}),
                      Catch::Contains("needs the progress thread"));
}

TEST_CASE("DenseExchange rejects calls out of order") {
  DenseExchange ex(MPI_COMM_WORLD, numel, omgs_examples::make_buckets(numel, 0.0),
                   omgs_examples::AllreduceVariant{});
  CHECK_THROWS_AS(ex.ready(3), omgs::Error);  // before begin()
  CHECK_THROWS_AS(ex.finish(), omgs::Error);
  CHECK_THROWS_AS(ex.gradient(4), omgs::Error);
  ex.begin();
  CHECK_THROWS_AS(ex.begin(), omgs::Error);
  CHECK_THROWS_AS(ex.ready(0), omgs::Error);  // layer 3 first
  CHECK_THROWS_AS(ex.finish(), omgs::Error);  // not every layer ready
  for (std::size_t l = numel.size(); l-- > 0;) {
    write(ex.gradient(l), World().rank, l);
    ex.ready(l);
  }
  CHECK_THROWS_AS(ex.ready(0), omgs::Error);  // twice
  ex.finish();
  check_mean(ex, numel);
}

TEST_CASE("BucketProgress posts in bucket order and completes each bucket once") {
  // Each bucket is one int, summed over ranks; done() records the order of completion.
  constexpr int buckets = 5;
  for (const bool thread : {false, true}) {
    INFO("thread " << thread);
    std::vector<int> value(buckets), sum(buckets), posted, completed;
    std::mutex m;  // done() runs on the progress thread
    omgs_examples::BucketProgress p(
        MPI_COMM_WORLD, buckets,
        [&](int b, MPI_Request* req) {
          posted.push_back(b);
          MPI_Iallreduce(&value[b], &sum[b], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req);
        },
        [&](int b) {
          std::lock_guard<std::mutex> lock(m);
          completed.push_back(b);
        },
        thread);
    CHECK(p.threaded() == thread);
    for (int it = 0; it < 3; ++it) {
      posted.clear();
      completed.clear();
      p.start();
      for (int b = 0; b < buckets; ++b) {
        value[b] = (b + 1) * (it + 1) * (World().rank + 1);
        p.ready(b);
      }
      p.finish("the test's allreduce");
      CHECK(posted == std::vector<int>{0, 1, 2, 3, 4});
      std::vector<int> sorted = completed;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == std::vector<int>{0, 1, 2, 3, 4});
      const int ranks = World().size;
      for (int b = 0; b < buckets; ++b)
        CHECK(sum[b] == (b + 1) * (it + 1) * ranks * (ranks + 1) / 2);
    }
  }
}

TEST_CASE("BucketProgress destroyed mid-iteration completes what it posted") {
  for (const bool thread : {false, true}) {
    INFO("thread " << thread);
    int value = World().rank + 1, sum = 0;
    {
      omgs_examples::BucketProgress p(
          MPI_COMM_WORLD, 2,
          [&](int, MPI_Request* req) {
            MPI_Iallreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req);
          },
          [](int) {}, thread);
      p.start();
      p.ready(0);  // bucket 1 never: as after an exception in the backward pass
    }
    const int ranks = World().size;
    CHECK(sum == ranks * (ranks + 1) / 2);  // complete before the destructor returned
    MPI_Barrier(MPI_COMM_WORLD);            // and nothing left in the collective stream
  }
}

TEST_CASE("make_dense_exchange: buckets of the given MB, a variant") {
  const DenseExchange per_layer = omgs_examples::make_dense_exchange(MPI_COMM_WORLD, numel, 0.0, 1);
  CHECK(per_layer.num_buckets() == 4u);
  const DenseExchange one = omgs_examples::make_dense_exchange(MPI_COMM_WORLD, numel, 25.0, 1);
  CHECK(one.num_buckets() == 1u);
  CHECK(one.flat().extent(0) == 100u);
}

TEST_CASE("max_relative_difference") {
  CHECK(omgs_examples::max_relative_difference({1, 2}, {1, 2}) == 0.0);
  CHECK(omgs_examples::max_relative_difference({4, 0.5f}, {5, 0.25f}) == Approx(0.25));
  CHECK(std::isinf(omgs_examples::max_relative_difference({1}, {1, 2})));
  CHECK(std::isinf(
      omgs_examples::max_relative_difference({1}, {std::numeric_limits<float>::quiet_NaN()})));
}
