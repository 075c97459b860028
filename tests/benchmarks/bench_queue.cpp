// omgs-bench-queue: omgs::BoundedQueue against std::mutex + std::deque and
// boost::lockfree::queue, with 2 threads.
//   throughput: one producer pushes N items, one consumer pops them (ops/s = N / time)
//   round trip: ping-pong of one item through two queues (latency = time / round trips)
// Usage: omgs-bench-queue [items=2000000] [round_trips=200000] [repeats=3]
#include <omgs/queue.hpp>

#include <boost/lockfree/queue.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kCapacity = 1024;

struct OmgsQueue {
  omgs::BoundedQueue<std::uint64_t> q{kCapacity};
  bool push(std::uint64_t v) { return q.try_push(v); }
  bool pop(std::uint64_t& v) { return q.try_pop(v); }
  static const char* name() { return "omgs::BoundedQueue"; }
};

struct BoostQueue {
  boost::lockfree::queue<std::uint64_t, boost::lockfree::capacity<kCapacity - 1>> q;
  bool push(std::uint64_t v) { return q.bounded_push(v); }
  bool pop(std::uint64_t& v) { return q.pop(v); }
  static const char* name() { return "boost::lockfree::queue"; }
};

struct MutexQueue {
  std::mutex m;
  std::deque<std::uint64_t> q;
  bool push(std::uint64_t v) {
    std::lock_guard<std::mutex> lock(m);
    if (q.size() >= kCapacity) return false;
    q.push_back(v);
    return true;
  }
  bool pop(std::uint64_t& v) {
    std::lock_guard<std::mutex> lock(m);
    if (q.empty()) return false;
    v = q.front();
    q.pop_front();
    return true;
  }
  static const char* name() { return "std::mutex + std::deque"; }
};

template <class Q>
double throughput(std::uint64_t items) {
  Q q;
  std::uint64_t sum = 0;
  const auto t0 = Clock::now();
  std::thread consumer([&] {
    std::uint64_t v = 0;
    for (std::uint64_t got = 0; got < items;) {
      if (q.pop(v)) {
        sum += v;
        ++got;
      }
    }
  });
  for (std::uint64_t i = 0; i < items;) {
    if (q.push(i)) ++i;
  }
  consumer.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (sum != items * (items - 1) / 2) {
    std::fprintf(stderr, "%s: lost items!\n", Q::name());
    std::exit(1);
  }
  return static_cast<double>(items) / s;
}

template <class Q>
double round_trip_ns(std::uint64_t trips) {
  Q ping, pong;
  const auto t0 = Clock::now();
  std::thread echo([&] {
    std::uint64_t v = 0;
    for (std::uint64_t n = 0; n < trips; ++n) {
      while (!ping.pop(v)) {
      }
      while (!pong.push(v + 1)) {
      }
    }
  });
  std::uint64_t v = 0;
  for (std::uint64_t n = 0; n < trips; ++n) {
    while (!ping.push(n)) {
    }
    while (!pong.pop(v)) {
    }
    if (v != n + 1) {
      std::fprintf(stderr, "%s: wrong echo\n", Q::name());
      std::exit(1);
    }
  }
  echo.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
         static_cast<double>(trips);
}

template <class Q>
void bench(std::uint64_t items, std::uint64_t trips, int repeats) {
  double best_ops = 0, best_rt = 1e300;
  for (int r = 0; r < repeats; ++r) {
    best_ops = std::max(best_ops, throughput<Q>(items));
    best_rt = std::min(best_rt, round_trip_ns<Q>(trips));
  }
  std::printf("%-26s %14.3e ops/s %12.0f ns round trip\n", Q::name(), best_ops, best_rt);
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2000000;
  const std::uint64_t trips = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 200000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  std::printf("2 threads, capacity %zu, %llu items, %llu round trips, best of %d\n", kCapacity,
              static_cast<unsigned long long>(items), static_cast<unsigned long long>(trips),
              repeats);
  bench<OmgsQueue>(items, trips, repeats);
  bench<BoostQueue>(items, trips, repeats);
  bench<MutexQueue>(items, trips, repeats);
  return 0;
}
