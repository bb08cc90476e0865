// Helpers shared by the serve tests: tiny random models and driving streams through a CachedDecoder.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../model/model_test_support.h"
#include "decode/cached_decoder.h"

namespace sinklm::testing_support {

// Tiny models are dominated by per-operation overhead; intra-op threads only add contention on a shared
// machine (they made these tests 10x slower), so every serve test runs LibTorch single-threaded.
inline const bool kSingleThreaded = (torch::set_num_threads(1), true);

// A tiny model whose biases and sink logits are random too (the initialisation zeroes them), so every
// parameter can influence the logits being compared.
inline GPTNeoXForCausalLM random_tiny_model(const std::string& sink_mode, std::vector<std::string> overrides = {}) {
  GPTNeoXForCausalLM model(ModelConfig::from(tiny_config(sink_mode, std::move(overrides))));
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  for (auto& p : model->parameters()) p.add_(torch::randn(p.sizes()) * 0.05);
  randomize_sink_parameters(model);
  return model;
}

inline std::shared_ptr<const KvCachePolicy> policy_of(const std::string& name, int64_t window, int64_t sinks,
                                                      const ModelConfig& model) {
  CacheOptions o;
  o.policy = name;
  o.window = window;
  o.sinks = sinks;
  return make_cache_policy(o, model);
}

// Streams `ids` through `stream` in chunks of at most `chunk`; returns the logits of every token [N, V].
inline torch::Tensor stream_logits(CachedDecoder& decoder, DecoderStream& stream, const std::vector<int64_t>& ids,
                                   int64_t chunk) {
  std::vector<torch::Tensor> rows;
  for (size_t at = 0; at < ids.size();) {
    const int64_t take = std::min<int64_t>(stream.max_chunk(chunk), ids.size() - at);
    std::vector<int64_t> part(ids.begin() + at, ids.begin() + at + take);
    rows.push_back(decoder.step({{&stream, part}}, LogitsWanted::All)[0]);
    at += take;
  }
  return torch::cat(rows, 0);
}

inline std::vector<int64_t> random_token_ids(int64_t count, int64_t vocab, uint64_t seed) {
  auto t = random_ids(1, count, vocab, seed)[0];
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + count);
}

// max |a - b| / max |b|
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

// Drives the same streams through two decoders step by step: `batched` pools the caches and batches decode
// tokens, `alone` attends stream by stream. Step s gives every stream one token, except that stream
// s % streams gets a prefill chunk of 3 (mixed prefill and decode in one step). Streams start at staggered
// lengths (some inside their sinks) and run past the window, so eviction and the ring's wrap are covered.
// Returns the largest relative error of any chunk's logits.
inline double batched_against_alone(const GPTNeoXForCausalLM& model, std::shared_ptr<const KvCachePolicy> policy,
                             PositionRule rule, int64_t streams, int64_t steps, int64_t* batched_tokens) {
  const auto& c = model->config();
  CachedDecoder batched(model), alone(model);
  alone.set_batched_decode(false);
  std::vector<std::unique_ptr<DecoderStream>> a, b;
  for (int64_t i = 0; i < streams; ++i) {
    a.push_back(std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, c, torch::kCPU));
    b.push_back(std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, c, torch::kCPU));
    const auto start = with_sink_prefix(c, random_token_ids(2 * i + 1, c.tokenizer_vocab_size, 40 + i));
    stream_logits(batched, *a[i], start, 1);
    stream_logits(alone, *b[i], start, 1);
  }
  double worst = 0;
  const auto ids = random_token_ids(steps * streams * 3, c.tokenizer_vocab_size, 77);
  size_t next = 0;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<StreamChunk> ca, cb;
    for (int64_t i = 0; i < streams; ++i) {
      const int64_t take = i == s % streams ? a[i]->max_chunk(3) : 1;
      std::vector<int64_t> part(ids.begin() + next, ids.begin() + next + take);
      next += take;
      ca.push_back({a[i].get(), part});
      cb.push_back({b[i].get(), part});
    }
    auto la = batched.step(ca, LogitsWanted::All), lb = alone.step(cb, LogitsWanted::All);
    for (int64_t i = 0; i < streams; ++i) worst = std::max(worst, relative_error(la[i], lb[i]));
  }
  *batched_tokens = batched.batched_decode_tokens();
  EXPECT_EQ(alone.batched_decode_tokens(), 0);
  return worst;
}

}  // namespace sinklm::testing_support
