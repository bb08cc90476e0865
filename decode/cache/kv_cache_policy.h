// KV cache policies: which entries of an endless token stream a cache keeps. Every policy keeps the same
// shape of set, "S sinks + R recent": the entries at stream positions 0..S-1 (never evicted) and the R most
// recent ones (a contiguous run of the stream). The budget W = S + R is the most entries ever held, counting
// the token being appended: the new token attends to at most W entries including itself.
//
//   full         S = 0, R = limit; refuses (UserError) to go past the limit instead of evicting
//   window       S = 0, R = W
//   sink_window  S sinks + R = W - S recent (S = 0 is window)
//   recompute    the same set of tokens, but no KV is kept: each new token re-encodes the held tokens
//   heads        per head (HeadAwareCache): a streaming head keeps S + (W - S), a retrieval head (named in a
//                head-policy file, decode/cache/head_roles.h) S + (R - S), each with positions inside its own cache
//
// Positions seen by attention are a separate choice (PositionRule), see decode/attention/stream_cache.h. A policy also
// says how entries are stored: kv_format() (decode/cache/kv_format.h: float32, bfloat16 or int8). The
// literal reference cache always stores float32.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "decode/cache/cache_options.h"
#include "decode/cache/head_roles.h"

namespace sinklm {

class HeadAwareCache;

class KvCachePolicy {
 public:
  virtual ~KvCachePolicy() = default;
  virtual std::string name() const = 0;
  virtual bool recomputes() const { return false; }
  // Whether a stream's cache fills its whole budget and then evicts (window, sink_window): its storage can
  // be allocated once, in a shared pool (decode/cache/kv_pool.h). `full` only refuses past a limit that is often
  // far above use, so it grows instead.
  virtual bool fills_budget() const { return !recomputes(); }
  // Called before `count` tokens are appended to a stream of `stream_length`; FullCache refuses past its limit.
  virtual void check_append(int64_t stream_length, int64_t count) const;

  int64_t sinks() const { return sinks_; }
  KvFormat kv_format() const { return kv_format_; }
  virtual void set_kv_format(KvFormat format) { kv_format_ = format; }
  int64_t recent_capacity() const { return recent_; }
  int64_t budget() const { return sinks_ + recent_; }

  // Entries held once a stream has `stream_length` tokens: min(S, n) + min(n - min(S, n), R).
  int64_t entries_after(int64_t stream_length) const;
  // Their stream positions in cache order (ascending).
  std::vector<int64_t> held_positions(int64_t stream_length) const;
  // Index of stream token t inside the cache at the step that appends it: min(t, W - 1).
  int64_t cache_position(int64_t t) const { return t < budget() - 1 ? t : budget() - 1; }
  // "4+1020"-style label.
  virtual std::string label() const;
  // Entries of layer `layer` summed over its `heads` heads once a stream has `stream_length` tokens: what
  // its K/V memory is made of (every head the same unless the policy is head-aware).
  virtual int64_t head_entries_after(int64_t layer, int64_t stream_length, int64_t heads) const;
  // The [heads, entries, D] shape of each tensor of a snapshot's keys (and values) after `stream_length`
  // tokens: one per layer, or one per layer and head group (HeadAwareCache).
  virtual std::vector<std::vector<int64_t>> snapshot_shapes(int64_t stream_length, const ModelConfig& model) const;
  // This policy as a head-aware one, else null (every head follows the policy itself).
  virtual const HeadAwareCache* head_aware() const { return nullptr; }

 protected:
  KvCachePolicy(int64_t sinks, int64_t recent);

 private:
  int64_t sinks_, recent_;
  KvFormat kv_format_ = KvFormat::Fp32;
};

class SinkWindowCache : public KvCachePolicy {
 public:
  SinkWindowCache(int64_t sinks, int64_t window);
  std::string name() const override { return "sink_window"; }
};

class WindowCache : public KvCachePolicy {
 public:
  explicit WindowCache(int64_t window);
  std::string name() const override { return "window"; }
};

class FullCache : public KvCachePolicy {
 public:
  explicit FullCache(int64_t limit);
  std::string name() const override { return "full"; }
  bool fills_budget() const override { return false; }
  void check_append(int64_t stream_length, int64_t count) const override;
};

class RecomputeCache : public KvCachePolicy {
 public:
  RecomputeCache(int64_t sinks, int64_t window);
  std::string name() const override { return "recompute"; }
  bool recomputes() const override { return true; }
};

// heads: see the top of this file. As a KvCachePolicy it describes the union of what its heads hold, the
// retrieval budget R (S sinks + R - S recent): a stream's held tokens and entries() follow it; its memory
// follows the groups (head_entries_after), and so do the stream caches (decode/attention/stream_cache.h).
class HeadAwareCache : public KvCachePolicy {
 public:
  HeadAwareCache(HeadRoles roles, int64_t sinks, int64_t window, int64_t retrieval_window);
  std::string name() const override { return "heads"; }
  std::string label() const override;  // "1+31/1+127": streaming / retrieval
  void set_kv_format(KvFormat format) override;
  int64_t head_entries_after(int64_t layer, int64_t stream_length, int64_t heads) const override;
  std::vector<std::vector<int64_t>> snapshot_shapes(int64_t stream_length, const ModelConfig& model) const override;
  const HeadAwareCache* head_aware() const override { return this; }

  struct Group {
    std::shared_ptr<KvCachePolicy> policy;   // a SinkWindowCache
    std::vector<std::vector<int64_t>> heads;  // per layer, ascending (a layer may have none)
  };
  const std::vector<Group>& groups() const { return groups_; }  // streaming, then retrieval
  const HeadRoles& roles() const { return roles_; }
  int64_t window() const { return window_; }
  int64_t retrieval_window() const { return budget(); }

 private:
  HeadRoles roles_;
  int64_t window_;
  std::vector<Group> groups_;
};

// The policy `options` ask for, their sentinels resolved first (resolve_cache_options, without a trained
// length: a window must be given). UserError naming `field` (e.g. "--cache") and listing the choices.
std::unique_ptr<KvCachePolicy> make_cache_policy(const CacheOptions& options, const ModelConfig& model,
                                                 const std::string& field = "cache");
// What make_cache_policy needs to build `policy` again ("cache", "window", "sinks", "kv_dtype"; heads also
// "retrieval_window" and "head_policy"), and back; UserError naming `where` and the field.
nlohmann::json cache_policy_json(const KvCachePolicy& policy);
CacheOptions cache_options_from_json(const nlohmann::json& json, const std::string& where);
// K/V bytes of one stream in layer `layer` after `stream_length` tokens (keys and values, the policy's
// K/V format); recompute keeps none.
int64_t kv_bytes_in_layer(const KvCachePolicy& policy, const ModelConfig& model, int64_t layer, int64_t stream_length);
// Summed over layers, and that sum once every budget is full (steady state), as "kv_bytes_per_stream" and
// "kv_bytes_per_layer" in a JSON object, with "streams_per_gib": how many such streams 1 GiB of K/V holds.
int64_t kv_bytes_per_stream(const KvCachePolicy& policy, const ModelConfig& model, int64_t stream_length);
nlohmann::json kv_memory_json(const KvCachePolicy& policy, const ModelConfig& model);

}  // namespace sinklm
