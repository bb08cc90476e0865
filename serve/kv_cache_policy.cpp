#include "serve/kv_cache_policy.h"

#include <algorithm>

#include "core/error.h"

namespace sinklm {

KvCachePolicy::KvCachePolicy(int64_t sinks, int64_t recent) : sinks_(sinks), recent_(recent) {
  SINKLM_ASSERT(sinks >= 0 && recent >= 1, "sinks ", sinks, " recent ", recent);
}

void KvCachePolicy::check_append(int64_t, int64_t) const {}

int64_t KvCachePolicy::entries_after(int64_t stream_length) const {
  const int64_t sinks_held = std::min(sinks_, stream_length);
  return sinks_held + std::min(stream_length - sinks_held, recent_);
}

std::vector<int64_t> KvCachePolicy::held_positions(int64_t stream_length) const {
  std::vector<int64_t> positions;
  const int64_t sinks_held = std::min(sinks_, stream_length);
  for (int64_t p = 0; p < sinks_held; ++p) positions.push_back(p);
  for (int64_t p = std::max(sinks_held, stream_length - recent_); p < stream_length; ++p) positions.push_back(p);
  return positions;
}

std::string KvCachePolicy::label() const { return str(sinks_, "+", recent_); }

SinkWindowCache::SinkWindowCache(int64_t sinks, int64_t window) : KvCachePolicy(sinks, window - sinks) {}

WindowCache::WindowCache(int64_t window) : KvCachePolicy(0, window) {}

FullCache::FullCache(int64_t limit) : KvCachePolicy(0, limit) {}

void FullCache::check_append(int64_t stream_length, int64_t count) const {
  if (stream_length + count > budget())
    fail("the full KV cache holds at most ", budget(), " entries and this stream would reach ",
         stream_length + count, "; raise the limit (--window) or use a bounded policy (sink_window)");
}

RecomputeCache::RecomputeCache(int64_t sinks, int64_t window) : KvCachePolicy(sinks, window - sinks) {}

namespace {

std::unique_ptr<KvCachePolicy> make_policy_of_kind(const CacheOptions& o, const ModelConfig& model,
                                                   const std::string& field) {
  if (o.window < 1) fail(field, ": the window (cache size) must be at least 1, got ", o.window);
  auto sinks_or = [&](int64_t fallback) {
    const int64_t s = o.sinks < 0 ? fallback : o.sinks;
    if (s >= o.window)
      fail(field, ": ", s, " sinks leave no room for recent tokens in a window of ", o.window,
           "; use fewer sinks or a larger window");
    return s;
  };
  if (o.policy == "full") {
    if (o.sinks > 0) fail(field, ": the full cache keeps everything, so sinks (", o.sinks, ") do not apply");
    return std::make_unique<FullCache>(o.window);
  }
  if (o.policy == "window") {
    if (o.sinks > 0) fail(field, ": window keeps no sinks (got ", o.sinks, "); use sink_window");
    return std::make_unique<WindowCache>(o.window);
  }
  if (o.policy == "sink_window") return std::make_unique<SinkWindowCache>(sinks_or(default_cache_sinks(model)), o.window);
  if (o.policy == "recompute") return std::make_unique<RecomputeCache>(sinks_or(0), o.window);
  fail(field, ": unknown cache policy '", o.policy, "'; expected full, window, sink_window or recompute");
}

}  // namespace

std::unique_ptr<KvCachePolicy> make_cache_policy(const CacheOptions& o, const ModelConfig& model,
                                                 const std::string& field) {
  auto policy = make_policy_of_kind(o, model, field);
  policy->set_kv_dtype(o.kv_dtype);
  return policy;
}

torch::ScalarType parse_kv_dtype(const std::string& text, const std::string& field) {
  if (text == "fp32") return torch::kFloat32;
  if (text == "bf16") return torch::kBFloat16;
  fail(field, ": unknown KV dtype '", text, "'; expected fp32 or bf16");
}

const char* kv_dtype_name(torch::ScalarType dtype) { return dtype == torch::kBFloat16 ? "bf16" : "fp32"; }

PositionRule parse_position_rule(const std::string& text, const std::string& field) {
  if (text == "cache") return PositionRule::Cache;
  if (text == "stream") return PositionRule::Stream;
  fail(field, ": unknown position rule '", text, "'; expected cache or stream");
}

const char* position_rule_name(PositionRule rule) { return rule == PositionRule::Cache ? "cache" : "stream"; }

}  // namespace sinklm
