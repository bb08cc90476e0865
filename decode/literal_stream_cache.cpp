// The reference of decode/stream_cache.h, written the way StreamingLLM describes it: keys are kept before
// rotary; each new token is appended, the oldest non-sink entry is evicted once the budget is exceeded, and
// every held key is rotated afresh at its position (cache index or stream position) before attending.
#include <torch/torch.h>

#include "core/error.h"
#include "model/attention.h"
#include "model/rotary.h"
#include "decode/stream_cache.h"

namespace sinklm {
namespace {

class LiteralStreamCache : public StreamCache {
 public:
  LiteralStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, const ModelConfig& model,
                     torch::Device device)
      : StreamCache(std::move(policy), rule),
        rotary_(model.rotary_dims(), model.rotary_base),
        device_(device),
        keys_(model.num_layers),
        values_(model.num_layers),
        positions_(model.num_layers) {
    for (int64_t l = 0; l < model.num_layers; ++l) {
      keys_[l] = torch::zeros({model.num_heads, 0, model.head_dim()}, torch::TensorOptions().device(device));
      values_[l] = keys_[l].clone();
    }
  }

  void restore(const CacheSnapshot& s) override {
    stream_length_ = s.stream_length;
    for (size_t l = 0; l < keys_.size(); ++l) {
      keys_[l] = s.keys[l].to(device_);
      values_[l] = s.values[l].to(device_);
      positions_[l] = policy_->held_positions(s.stream_length);
    }
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    const int64_t T = q.size(1);
    policy_->check_append(stream_length_, T);
    std::vector<torch::Tensor> outputs;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t t = stream_length_ + i;
      auto& keys = keys_[layer];          // [H, N, D], un-rotated, cache order
      auto& values = values_[layer];      // [H, N, D]
      auto& positions = positions_[layer];  // stream position of each entry
      keys = torch::cat({keys, k.narrow(1, i, 1)}, 1);
      values = torch::cat({values, v.narrow(1, i, 1)}, 1);
      positions.push_back(t);
      if (static_cast<int64_t>(positions.size()) > policy_->budget()) {  // evict the oldest non-sink entry
        const int64_t victim = policy_->sinks();
        keys = torch::cat({keys.narrow(1, 0, victim), keys.narrow(1, victim + 1, keys.size(1) - victim - 1)}, 1);
        values = torch::cat({values.narrow(1, 0, victim), values.narrow(1, victim + 1, values.size(1) - victim - 1)}, 1);
        positions.erase(positions.begin() + victim);
      }
      const int64_t n = static_cast<int64_t>(positions.size());
      auto key_positions = rule_ == PositionRule::Cache ? torch::arange(n, torch::kInt64)
                                                        : torch::tensor(positions, torch::kInt64);
      auto [cos, sin] = rotary_.cos_sin(key_positions.to(device_));          // [N, R]; the query is entry N-1
      auto rotated_keys = apply_rotary(keys, cos, sin);                       // [H, N, D]
      auto query = apply_rotary(q.narrow(1, i, 1), cos.narrow(0, n - 1, 1), sin.narrow(0, n - 1, 1));  // [H, 1, D]
      outputs.push_back(causal_attention(query.unsqueeze(0), rotated_keys.unsqueeze(0), values.unsqueeze(0),
                                         sink, AttentionImpl::Reference)[0]);
    }
    return torch::cat(outputs, 1);  // [H, T, D]
  }

  void advance(int64_t count) override { stream_length_ += count; }
  int64_t max_chunk(int64_t preferred) const override { return preferred; }
  int64_t entries() const override { return keys_[0].size(1); }
  int64_t allocated_entries() const override { return keys_[0].size(1); }
  int64_t kv_bytes() const override {
    return 2 * static_cast<int64_t>(keys_.size()) * keys_[0].numel() * static_cast<int64_t>(keys_[0].element_size());
  }

  CacheSnapshot snapshot() const override {
    CacheSnapshot s;
    s.stream_length = stream_length_;
    for (size_t l = 0; l < keys_.size(); ++l) {
      s.keys.push_back(keys_[l].cpu());
      s.values.push_back(values_[l].cpu());
    }
    return s;
  }

 private:
  RotaryEmbedding rotary_;
  torch::Device device_;
  std::vector<torch::Tensor> keys_, values_;
  std::vector<std::vector<int64_t>> positions_;
};

}  // namespace

void check_snapshot(const CacheSnapshot& s, const KvCachePolicy& policy, const ModelConfig& model) {
  const auto shapes = policy.snapshot_shapes(s.stream_length, model);
  if (s.keys.size() != shapes.size() || s.values.size() != s.keys.size())
    fail("cache snapshot has ", s.keys.size(), " key tensors, a ", policy.name(), " ", policy.label(), " cache of this model has ",
         shapes.size());
  for (size_t i = 0; i < s.keys.size(); ++i)
    if (s.keys[i].sizes() != shapes[i] || s.values[i].sizes() != shapes[i])
      fail("cache snapshot tensor ", i, ": keys ", s.keys[i].sizes(), " / values ", s.values[i].sizes(), ", expected ",
           c10::IntArrayRef(shapes[i]), " for a ", policy.name(), " ", policy.label(), " cache after ", s.stream_length,
           " tokens");
}

std::unique_ptr<StreamCache> make_literal_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                       PositionRule rule, const ModelConfig& model,
                                                       torch::Device device) {
  return std::make_unique<LiteralStreamCache>(std::move(policy), rule, model, device);
}

}  // namespace sinklm
