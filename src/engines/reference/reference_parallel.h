// A fixed partition of independent work items over the engine's threads. Each item computes
// and writes its own outputs with a fixed loop order, so results are bitwise identical for any
// thread count and any timing.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <system_error>
#include <thread>

namespace floe::detail::reference {

inline constexpr int kMaxThreads = 64;

// Runs fn(item, scratch) for every item in [0, n): thread t takes items t, t + T, t + 2T, ...
// (interleaved, so that causal rows of growing cost spread evenly) and owns the scratch
// block scratch + t * scratch_per_thread.
template <class Fn>
void for_each_item(int threads, int64_t n, double* scratch, int64_t scratch_per_thread,
                   const Fn& fn) {
  const int t_count =
      static_cast<int>(std::clamp<int64_t>(n, 1, std::clamp(threads, 1, kMaxThreads)));
  auto work = [&](int t) {
    for (int64_t item = t; item < n; item += t_count) fn(item, scratch + t * scratch_per_thread);
  };
  std::array<std::thread, kMaxThreads> pool;
  for (int t = 1; t < t_count; ++t) {
    try {
      pool[t] = std::thread(work, t);
    } catch (const std::system_error&) {
      work(t);  // no thread to be had: the items are independent, so run them here
    }
  }
  work(0);
  for (int t = 1; t < t_count; ++t) {
    if (pool[t].joinable()) pool[t].join();
  }
}

}  // namespace floe::detail::reference
