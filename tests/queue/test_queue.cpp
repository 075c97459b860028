// omgs::BoundedQueue: single-thread semantics and multi-threaded stress.
#include <omgs/queue.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "omgs_catch.hpp"

using omgs::BoundedQueue;

TEST_CASE("queue rejects capacities that are not powers of two", "[queue]") {
  CHECK_THROWS_AS(BoundedQueue<int>(0), omgs::Error);
  CHECK_THROWS_AS(BoundedQueue<int>(1), omgs::Error);
  CHECK_THROWS_AS(BoundedQueue<int>(3), omgs::Error);
  CHECK_THROWS_AS(BoundedQueue<int>(1000), omgs::Error);
  CHECK(BoundedQueue<int>(2).capacity() == 2);
  CHECK(BoundedQueue<int>(1024).capacity() == 1024);
}

TEST_CASE("queue is FIFO and reports full and empty", "[queue]") {
  BoundedQueue<int> q(8);
  int out = -1;
  CHECK(q.empty_approx());
  CHECK_FALSE(q.try_pop(out));
  CHECK(out == -1);  // untouched on empty
  for (int i = 0; i < 8; ++i) REQUIRE(q.try_push(i));
  CHECK(q.size_approx() == 8);
  CHECK_FALSE(q.try_push(99));  // full: nothing changed
  CHECK(q.size_approx() == 8);
  for (int i = 0; i < 8; ++i) {
    REQUIRE(q.try_pop(out));
    CHECK(out == i);
  }
  CHECK_FALSE(q.try_pop(out));
  CHECK(q.empty_approx());
}

TEST_CASE("queue wraps around many times", "[queue]") {
  BoundedQueue<std::uint64_t> q(4);
  std::uint64_t next_in = 0, next_out = 0, out = 0;
  // Mixed fill levels so every slot is reused at every phase, 100000 laps of the ring.
  for (int round = 0; round < 100000; ++round) {
    const int pushes = 1 + round % 4;
    for (int i = 0; i < pushes; ++i) {
      if (q.try_push(next_in)) ++next_in;
    }
    const int pops = 1 + (round * 7) % 4;
    for (int i = 0; i < pops; ++i) {
      if (q.try_pop(out)) {
        REQUIRE(out == next_out);
        ++next_out;
      }
    }
    REQUIRE(next_in - next_out == q.size_approx());
    REQUIRE(q.size_approx() <= 4);
  }
  while (q.try_pop(out)) REQUIRE(out == next_out++);
  CHECK(next_in == next_out);
  CHECK(next_in > 4 * 100000 / 2);
}

TEST_CASE("queue holds structs and copies them whole", "[queue]") {
  struct Item {
    int group;
    double t;
  };
  BoundedQueue<Item> q(2);
  REQUIRE(q.try_push(Item{3, 1.5}));
  Item out{};
  REQUIRE(q.try_pop(out));
  CHECK(out.group == 3);
  CHECK(out.t == 1.5);
}

namespace {
// Item = producer id in the high bits, sequence number in the low bits.
constexpr int kSeqBits = 40;

void run_stress(int producers, int consumers, std::uint64_t per_producer, std::size_t capacity) {
  BoundedQueue<std::uint64_t> q(capacity);
  std::atomic<int> producers_done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        const std::uint64_t item = (static_cast<std::uint64_t>(p) << kSeqBits) | i;
        while (!q.try_push(item)) std::this_thread::yield();
      }
      producers_done.fetch_add(1);
    });
  }
  // Each consumer checks per-producer order of what *it* pops; the union is checked
  // for exactly-once afterwards.
  std::vector<std::vector<std::uint64_t>> seen_count(
      static_cast<std::size_t>(consumers),
      std::vector<std::uint64_t>(static_cast<std::size_t>(producers), 0));
  std::vector<std::vector<std::uint8_t>> seen(static_cast<std::size_t>(producers),
                                              std::vector<std::uint8_t>(per_producer, 0));
  std::atomic<std::uint64_t> order_violations{0}, duplicates{0};
  std::vector<std::thread> consumer_threads;
  for (int c = 0; c < consumers; ++c) {
    consumer_threads.emplace_back([&, c] {
      std::vector<std::int64_t> last(static_cast<std::size_t>(producers), -1);
      auto handle = [&](std::uint64_t item) {
        const auto p = static_cast<std::size_t>(item >> kSeqBits);
        const auto i = static_cast<std::int64_t>(item & ((std::uint64_t{1} << kSeqBits) - 1));
        if (i <= last[p]) order_violations.fetch_add(1);
        last[p] = i;
        // A duplicate shows as a second write of the same flag.
        std::uint8_t& flag = seen[p][static_cast<std::size_t>(i)];
        if (flag != 0) duplicates.fetch_add(1);
        flag = 1;
        ++seen_count[static_cast<std::size_t>(c)][p];
      };
      std::uint64_t item = 0;
      for (;;) {
        if (q.try_pop(item)) {
          handle(item);
        } else if (producers_done.load() == producers) {
          // Every push has returned (seq_cst counter), so an empty pop now is final.
          if (!q.try_pop(item)) break;
          handle(item);
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& t : consumer_threads) t.join();
  CHECK(order_violations.load() == 0);
  CHECK(duplicates.load() == 0);
  std::uint64_t missing = 0, total = 0;
  for (int p = 0; p < producers; ++p) {
    for (std::uint64_t i = 0; i < per_producer; ++i) {
      if (seen[static_cast<std::size_t>(p)][i] == 0) ++missing;
    }
    for (int c = 0; c < consumers; ++c) {
      total += seen_count[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
    }
  }
  CHECK(missing == 0);
  CHECK(total == per_producer * static_cast<std::uint64_t>(producers));
}

std::uint64_t items_per_producer(std::uint64_t normal) {
#if defined(__SANITIZE_THREAD__)
  return normal / 10;  // TSan is ~10x slower; the interleavings still get exercised
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return normal / 10;
#else
  return normal;
#endif
#else
  return normal;
#endif
}
}  // namespace

TEST_CASE("queue stress: 4 producers, 1 consumer, every item once, per-producer order",
          "[queue][stress]") {
  // 4 x 500000 = 2 million items through a small ring (many wrap-arounds, many full/empty).
  run_stress(4, 1, items_per_producer(500000), 64);
}

TEST_CASE("queue stress: 3 producers, 2 consumers (MPMC)", "[queue][stress]") {
  // With several consumers each one still sees any producer's items in order.
  run_stress(3, 2, items_per_producer(300000), 16);
}
