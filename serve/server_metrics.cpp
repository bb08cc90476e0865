#include "serve/server_metrics.h"

#include <sstream>

namespace sinklm {

const std::vector<double>& LatencyHistogram::bounds() {
  static const std::vector<double> b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return b;
}

void LatencyHistogram::observe(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t i = 0;
  while (i < bounds().size() && seconds > bounds()[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

std::string LatencyHistogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds().size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << bounds()[i] << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n" << name << "_sum " << sum_ << "\n" << name << "_count " << count_ << "\n";
  return out.str();
}

void ServerMetrics::count_response(const std::string& path, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[{path, status}];
}

std::string ServerMetrics::render(int64_t sessions_in_memory, int64_t sessions_on_disk, int64_t idle_kv_entries,
                                  int64_t idle_kv_bytes) const {
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* type, const char* help, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
  };
  gauge("sinklm_prompt_tokens_total", "counter", "prompt tokens streamed into caches", prompt_tokens);
  gauge("sinklm_generated_tokens_total", "counter", "tokens generated", generated_tokens);
  gauge("sinklm_active_streams", "gauge", "generations in the running batch", active_streams);
  gauge("sinklm_storage_errors_total", "counter",
        "session files that could not be written or made durable (the server's log names each)", storage_errors);
  gauge("sinklm_kv_entries", "gauge", "KV entries held by active streams and loaded sessions",
        active_kv_entries + idle_kv_entries);
  gauge("sinklm_kv_bytes", "gauge", "K/V storage bytes of active streams and loaded sessions, all layers and heads",
        active_kv_bytes + idle_kv_bytes);
  out << "# HELP sinklm_sessions sessions by where they are\n# TYPE sinklm_sessions gauge\n"
      << "sinklm_sessions{where=\"memory\"} " << sessions_in_memory << "\n"
      << "sinklm_sessions{where=\"disk\"} " << sessions_on_disk << "\n";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out << "# HELP sinklm_http_responses_total responses by path and status\n"
        << "# TYPE sinklm_http_responses_total counter\n";
    for (const auto& [key, n] : responses_)
      out << "sinklm_http_responses_total{path=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  }
  out << step_seconds.render("sinklm_step_seconds", "one batched forward pass over all active streams")
      << request_seconds.render("sinklm_request_seconds", "completion requests, first byte in to last byte out");
  return out.str();
}

}  // namespace sinklm
