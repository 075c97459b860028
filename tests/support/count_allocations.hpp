// Replaces the global operator new / delete of a test program to count allocations while
// omgs_test::count_allocations is set. Include it in exactly one source file of a program.
// Under AddressSanitizer (which owns operator new) the replacement is left out and
// OMGS_TEST_UNDER_ASAN is defined, so that tests skip their allocation checks.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define OMGS_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OMGS_TEST_UNDER_ASAN 1
#endif
#endif

// Under ThreadSanitizer the process's memory includes TSan's per-thread traces, which fill
// as threads run (a thread that sleeps instead of spinning fills its trace later, inside a
// measured window): tests skip their resident-memory checks (allocations are still counted).
#if defined(__SANITIZE_THREAD__)
#define OMGS_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OMGS_TEST_UNDER_TSAN 1
#endif
#endif

namespace omgs_test {
inline std::atomic<bool> count_allocations{false};
inline std::atomic<long> allocations{0};
}  // namespace omgs_test

// nvcc and hipcc compile every source twice; the device pass would take the replacement for
// a device-side operator new (which cannot throw): it is host code only.
#if !defined(OMGS_TEST_UNDER_ASAN) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// GCC flags malloc/free inside replaced operator new/delete as "mismatched"; here the
// pairing is deliberate and consistent.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (omgs_test::count_allocations.load(std::memory_order_relaxed))
    omgs_test::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#endif
