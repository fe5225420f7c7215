#pragma once
// The thread pool `moesim run`, `sweep` and `guideline` share: f(i) for i in [0, n) on up to
// `jobs` threads.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace moesim {

/// Runs f(i) for i in [0, n) on up to `jobs` threads. After an exception no new i starts; the
/// first exception is rethrown once every thread has stopped. f(0) runs alone first, so that
/// function-local statics (yaml-cpp's convert<bool> names, ...) are initialised before threads
/// exist: thread-safe anyway, but yaml-cpp is not built with ThreadSanitizer, which then cannot
/// see the guard and reports a race. Indices start in increasing order, so once f(j) has thrown
/// every f(i), i < j, has started too (and finished, by the time this returns).
template <class F>
void parallel_for(std::size_t n, unsigned jobs, F f) {
  if (n == 0) return;
  f(0);
  std::atomic<std::size_t> next{1};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < n;) {
      try {
        f(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < std::min<std::size_t>(std::max(jobs, 1u), n); ++t) threads.emplace_back(worker);
  worker();  // the calling thread works too
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

/// Like parallel_for, but the exception rethrown is that of the lowest failing i: the one a
/// serial loop over i would have met first, whatever the thread timing.
template <class F>
void parallel_for_ordered(std::size_t n, unsigned jobs, F f) {
  std::vector<std::exception_ptr> errors(n);
  try {
    parallel_for(n, jobs, [&](std::size_t i) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
        throw;  // no new i starts
      }
    });
  } catch (...) {
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    throw;
  }
}

}  // namespace moesim
