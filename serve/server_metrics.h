// Counters, gauges and latency histograms of the server, rendered in the Prometheus text format.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace sinklm {

class LatencyHistogram {
 public:
  void observe(double seconds);
  // "# TYPE name histogram" and its _bucket{le=...}, _sum and _count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  static const std::vector<double>& bounds();
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(bounds().size() + 1, 0);
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  std::atomic<int64_t> prompt_tokens{0}, generated_tokens{0}, active_streams{0}, active_kv_entries{0},
      active_kv_bytes{0}, storage_errors{0};
  LatencyHistogram step_seconds;     // one batched forward pass = one token of every decoding stream
  LatencyHistogram request_seconds;  // whole completion requests
  void count_response(const std::string& path, int status);
  // Gauges owned elsewhere are passed in at scrape time.
  std::string render(int64_t sessions_in_memory, int64_t sessions_on_disk, int64_t idle_kv_entries,
                     int64_t idle_kv_bytes) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
};

}  // namespace sinklm
