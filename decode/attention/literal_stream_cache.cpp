// The reference of decode/attention/stream_cache.h, written the way StreamingLLM describes it: keys are kept before
// rotary (in the same storage as the fast path, decode/cache/kv_storage.h); each new token is appended, the
// oldest non-sink entry is evicted once the budget is exceeded, and every held key is rotated afresh at its
// position (cache index or stream position) before attending.
#include <torch/torch.h>

#include "core/error.h"
#include "model/attention/attention.h"
#include "model/attention/rotary.h"
#include "decode/cache/kv_storage.h"
#include "decode/attention/stream_cache.h"

namespace sinklm {
namespace {

class LiteralStreamCache : public StoredStreamCache {
 public:
  LiteralStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, const ModelConfig& model,
                     torch::Device device)
      : StoredStreamCache(std::move(policy), rule, model, KvFormat::Fp32, device),  // keys un-rotated, whatever the policy's format
        rotary_(model.rotary_dims(), model.rotary_base),
        device_(device) {}

  void restore(const CacheSnapshot& s) override {
    stream_length_ = s.stream_length;
    const auto held = policy_->held_positions(s.stream_length);
    for (int64_t l = 0; l < storage_.layers(); ++l) storage_.place(l, held, s.keys[l].to(device_), s.values[l].to(device_));
  }

  // One token at a time: store it (the storage evicts the oldest recent entry once the ring is full), read
  // the held entries back in cache order, rotate every key afresh at its position and attend.
  torch::Tensor attend(int64_t layer, const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value,
                       const SinkColumn& sink) override {
    const auto q = query.to(torch::kFloat32), k = key.to(torch::kFloat32), v = value.to(torch::kFloat32);
    const int64_t T = q.size(1);
    policy_->check_append(stream_length_, T);
    std::vector<torch::Tensor> outputs;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t t = stream_length_ + i;
      storage_.write(layer, storage_.plan_writes(t, 1), k.narrow(1, i, 1), v.narrow(1, i, 1));
      const auto positions = policy_->held_positions(t + 1);  // stream position of each entry, cache order
      auto [keys, values] = storage_.gather(layer, positions);  // [H, N, D], un-rotated
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

 private:
  RotaryEmbedding rotary_;
  torch::Device device_;
};

}  // namespace

std::unique_ptr<StreamCache> make_literal_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                       PositionRule rule, const ModelConfig& model,
                                                       torch::Device device) {
  return std::make_unique<LiteralStreamCache>(std::move(policy), rule, model, device);
}

}  // namespace sinklm
