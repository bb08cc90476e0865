#include "decode/cache/kv_cache_policy.h"

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

int64_t KvCachePolicy::head_entries_after(int64_t, int64_t stream_length, int64_t heads) const {
  return recomputes() ? 0 : heads * entries_after(stream_length);
}

std::vector<std::vector<int64_t>> KvCachePolicy::snapshot_shapes(int64_t stream_length, const ModelConfig& model) const {
  return std::vector<std::vector<int64_t>>(model.num_layers,
                                           {model.num_heads, entries_after(stream_length), model.head_dim()});
}

SinkWindowCache::SinkWindowCache(int64_t sinks, int64_t window) : KvCachePolicy(sinks, window - sinks) {}

WindowCache::WindowCache(int64_t window) : KvCachePolicy(0, window) {}

FullCache::FullCache(int64_t limit) : KvCachePolicy(0, limit) {}

void FullCache::check_append(int64_t stream_length, int64_t count) const {
  if (stream_length + count > budget())
    fail("the full KV cache holds at most ", budget(), " entries and this stream would reach ",
         stream_length + count, "; raise the limit (--window) or use a bounded policy (sink_window)");
}

RecomputeCache::RecomputeCache(int64_t sinks, int64_t window) : KvCachePolicy(sinks, window - sinks) {}

HeadAwareCache::HeadAwareCache(HeadRoles roles, int64_t sinks, int64_t window, int64_t retrieval_window)
    : KvCachePolicy(sinks, retrieval_window - sinks), roles_(std::move(roles)), window_(window) {
  SINKLM_ASSERT(sinks < window && window < retrieval_window, "heads ", sinks, " ", window, " ", retrieval_window);
  groups_ = {{std::make_shared<SinkWindowCache>(sinks, window), {}},
             {std::make_shared<SinkWindowCache>(sinks, retrieval_window), {}}};
  for (int64_t l = 0; l < roles_.layers; ++l) {
    for (auto& group : groups_) group.heads.emplace_back();
    for (int64_t h = 0; h < roles_.heads; ++h) groups_[roles_.is_retrieval(l, h) ? 1 : 0].heads[l].push_back(h);
  }
}

std::string HeadAwareCache::label() const {
  return groups_[0].policy->label() + "/" + groups_[1].policy->label();
}

void HeadAwareCache::set_kv_format(KvFormat format) {
  KvCachePolicy::set_kv_format(format);
  for (auto& group : groups_) group.policy->set_kv_format(format);
}

int64_t HeadAwareCache::head_entries_after(int64_t layer, int64_t stream_length, int64_t) const {
  int64_t n = 0;
  for (const auto& group : groups_)
    n += static_cast<int64_t>(group.heads[layer].size()) * group.policy->entries_after(stream_length);
  return n;
}

std::vector<std::vector<int64_t>> HeadAwareCache::snapshot_shapes(int64_t stream_length, const ModelConfig& model) const {
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t l = 0; l < model.num_layers; ++l)
    for (const auto& group : groups_)
      if (!group.heads[l].empty())
        shapes.push_back({static_cast<int64_t>(group.heads[l].size()), group.policy->entries_after(stream_length),
                          model.head_dim()});
  return shapes;
}

namespace {

std::unique_ptr<KvCachePolicy> make_head_aware(const CacheOptions& o, const ModelConfig& model,
                                               const std::string& field) {
  if (!o.head_roles)
    fail(field, ": the heads cache needs --head-policy FILE; write one with `sinklm analyze --classify-heads FILE`");
  const HeadRoles& roles = *o.head_roles;
  if (roles.layers != model.num_layers || roles.heads != model.num_heads)
    fail(field, ": the head policy ", roles.source, " is for ", roles.layers, " layers x ", roles.heads, " heads, the model has ",
         model.num_layers, " x ", model.num_heads);
  return std::make_unique<HeadAwareCache>(roles, o.sinks, o.window, o.retrieval_window);
}

// o: resolved (resolve_cache_options).
std::unique_ptr<KvCachePolicy> make_policy_of_kind(const CacheOptions& o, const ModelConfig& model,
                                                   const std::string& field) {
  if (o.policy != "heads" && (o.head_roles || o.retrieval_window != kFollowModel))
    fail(field, ": a head policy and a retrieval window apply to the heads cache only, not ", o.policy);
  if (o.policy != "full" && o.policy != "window" && o.sinks >= o.window)
    fail(field, ": ", o.sinks, " sinks leave no room for recent tokens in a window of ", o.window,
         "; use fewer sinks or a larger window");
  if (o.policy == "full") {
    if (o.sinks > 0) fail(field, ": the full cache keeps everything, so sinks (", o.sinks, ") do not apply");
    return std::make_unique<FullCache>(o.window);
  }
  if (o.policy == "window") {
    if (o.sinks > 0) fail(field, ": window keeps no sinks (got ", o.sinks, "); use sink_window");
    return std::make_unique<WindowCache>(o.window);
  }
  if (o.policy == "sink_window") return std::make_unique<SinkWindowCache>(o.sinks, o.window);
  if (o.policy == "recompute") return std::make_unique<RecomputeCache>(o.sinks, o.window);
  SINKLM_ASSERT(o.policy == "heads", "cache policy '", o.policy, "' passed resolve_cache_options");
  return make_head_aware(o, model, field);
}

// int8 keeps the sink slots exact: a cache with none would quantise the very entries the format protects
// (a full cache holds the sink token in its ring; a window cache evicts it). recompute keeps no K/V at all.
void check_kv_format(const KvCachePolicy& policy, const std::string& field) {
  const KvFormat format = policy.kv_format();
  if (policy.recomputes() && format != KvFormat::Fp32)
    fail(field, ": recompute keeps no K/V, so --kv-dtype ", kv_format_name(format), " does not apply");
  if (kv_sinks_exact(format) && policy.sinks() == 0)
    fail(field, ": --kv-dtype ", kv_format_name(format), " keeps the sink slots exact in float32, but a ", policy.name(),
         " cache has none; use sink_window (or heads) with at least one sink, or --kv-dtype int8-all to quantise every entry");
}

}  // namespace

std::unique_ptr<KvCachePolicy> make_cache_policy(const CacheOptions& o, const ModelConfig& model,
                                                 const std::string& field) {
  auto policy = make_policy_of_kind(resolve_cache_options(o, model, kFollowModel, field), model, field);
  policy->set_kv_format(o.kv_format);
  check_kv_format(*policy, field);
  return policy;
}

nlohmann::json cache_policy_json(const KvCachePolicy& policy) {
  const HeadAwareCache* heads = policy.head_aware();
  nlohmann::json json = {{"cache", policy.name()},
                         {"window", heads ? heads->window() : policy.budget()},
                         {"sinks", policy.sinks()},
                         {"kv_dtype", kv_format_name(policy.kv_format())}};
  if (heads) {
    json["retrieval_window"] = heads->retrieval_window();
    json["head_policy"] = head_roles_json(heads->roles());
  }
  return json;
}

CacheOptions cache_options_from_json(const nlohmann::json& json, const std::string& where) {
  CacheOptions o;
  try {
    o.policy = json.at("cache").get<std::string>();
    o.window = json.at("window").get<int64_t>();
    o.sinks = json.at("sinks").get<int64_t>();
    o.retrieval_window = json.value("retrieval_window", int64_t{-1});
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": cache fields \"cache\", \"window\", \"sinks\" missing or mistyped (", e.what(), ")");
  }
  o.kv_format = parse_kv_format(json.value("kv_dtype", "fp32"), where + ": kv_dtype");
  if (json.contains("head_policy"))
    o.head_roles = std::make_shared<HeadRoles>(head_roles_from_json(json["head_policy"], where + ": head_policy"));
  return o;
}

int64_t kv_bytes_in_layer(const KvCachePolicy& policy, const ModelConfig& model, int64_t layer, int64_t stream_length) {
  // Keys and values: each held entry of each head, and each sink's exact copy where the format keeps one.
  const int64_t D = model.head_dim(), format_bytes = kv_entry_bytes(policy.kv_format(), D);
  const int64_t sinks = std::min(policy.sinks(), stream_length) * model.num_heads;  // recompute: fp32, no extra
  return 2 * (policy.head_entries_after(layer, stream_length, model.num_heads) * format_bytes +
              sinks * kv_sink_extra_bytes(policy.kv_format(), D));
}

int64_t kv_bytes_per_stream(const KvCachePolicy& policy, const ModelConfig& model, int64_t stream_length) {
  int64_t bytes = 0;
  for (int64_t l = 0; l < model.num_layers; ++l) bytes += kv_bytes_in_layer(policy, model, l, stream_length);
  return bytes;
}

nlohmann::json kv_memory_json(const KvCachePolicy& policy, const ModelConfig& model) {
  std::vector<int64_t> per_layer;
  for (int64_t l = 0; l < model.num_layers; ++l) per_layer.push_back(kv_bytes_in_layer(policy, model, l, policy.budget()));
  const int64_t per_stream = kv_bytes_per_stream(policy, model, policy.budget());
  nlohmann::json streams = nullptr;  // recompute: no K/V, no bound
  if (per_stream > 0) streams = (int64_t{1} << 30) / per_stream;
  return {{"kv_bytes_per_stream", per_stream}, {"kv_bytes_per_layer", per_layer}, {"streams_per_gib", streams}};
}

}  // namespace sinklm
