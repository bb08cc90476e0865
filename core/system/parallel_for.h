// Run body(i) for i in [0, count) on `threads` std::threads, handing out indices dynamically. The first
// exception thrown by any body is rethrown in the caller after all threads have stopped.
#pragma once
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sinklm {

template <typename Body>
void parallel_for(size_t count, int threads, Body body) {
  size_t workers = std::min<size_t>(count, threads < 1 ? 1 : static_cast<size_t>(threads));
  if (workers <= 1) {
    for (size_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = count;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < workers; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace sinklm
