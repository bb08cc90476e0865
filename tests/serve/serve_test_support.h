// Helpers shared by the serve tests: tiny random models and driving streams through a CachedDecoder.
#pragma once
#include <torch/torch.h>

#include "../model/model_test_support.h"
#include "serve/cached_decoder.h"

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

}  // namespace sinklm::testing_support
