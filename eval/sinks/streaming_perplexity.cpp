#include "eval/sinks/streaming_perplexity.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "model/kernels/token_scores.h"

namespace sinklm {
namespace {

double perplexity(const std::vector<float>& nll, size_t begin, size_t end) {
  if (end <= begin) return std::nan("");
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += nll[i];
  return std::exp(sum / static_cast<double>(end - begin));
}

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

}  // namespace

KvTrace stream_logits(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy, PositionRule rule,
                      KeyRotation rotation, const std::vector<int64_t>& ids, int64_t chunk, int64_t trace_every,
                      const std::function<void(int64_t first, const torch::Tensor& logits)>& on_logits) {
  const int64_t budget = policy->budget();
  DecoderStream stream(std::move(policy), rule, rotation, decoder.config(), decoder.device());
  KvTrace trace;
  int64_t next_trace = 0;
  for (int64_t at = 0; at < static_cast<int64_t>(ids.size());) {
    const int64_t take = std::min<int64_t>(stream.max_chunk(chunk), ids.size() - at);
    std::vector<int64_t> ids_chunk(ids.begin() + at, ids.begin() + at + take);
    on_logits(at, decoder.step({{&stream, ids_chunk}}, LogitsWanted::All)[0]);  // [take, V]
    at += take;
    const int64_t entries = stream.entries();
    SINKLM_ASSERT(entries <= budget, entries, " KV entries over a budget of ", budget);
    trace.max_entries = std::max(trace.max_entries, entries);
    if (at >= next_trace || at == static_cast<int64_t>(ids.size())) {
      trace.points.emplace_back(at, entries);
      next_trace = at + std::max<int64_t>(trace_every, 1);
    }
  }
  return trace;
}

StreamingPerplexity streaming_perplexity(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy,
                                         PositionRule rule, const std::vector<int64_t>& text_ids,
                                         const StreamingPerplexityOptions& options) {
  const auto& model = decoder.config();
  if (text_ids.size() < 2) fail("the text has ", text_ids.size(), " tokens; streaming perplexity needs at least 2");
  const std::vector<int64_t> ids = with_sink_prefix(model, text_ids);
  const int64_t first_text = sink_prefix_length(model);
  const int64_t budget = policy->budget();
  StreamingPerplexity r;
  const auto start = std::chrono::steady_clock::now();
  r.kv = stream_logits(decoder, std::move(policy), rule, options.rotation, ids, options.chunk, options.kv_trace_every,
                       [&](int64_t at, const torch::Tensor& logits) {
    // Position p predicts token p + 1; score the predictions of text tokens 1.. (p >= first_text).
    const int64_t from = std::max(at, first_text), to = std::min<int64_t>(at + logits.size(0), ids.size() - 1);
    if (to <= from) return;
    const auto scored = logits.narrow(0, from - at, to - from);  // [to - from, V]
    const auto [nll, top1] = token_scores(scored, {ids.begin() + from + 1, ids.begin() + to + 1});  // [to - from] each
    const float* values = nll.data_ptr<float>();
    const int64_t* ranked_first = top1.data_ptr<int64_t>();
    for (int64_t p = from; p < to; ++p) {
      if (r.eviction_starts_at < 0 && p >= budget) r.eviction_starts_at = r.nll.size();  // cache held > W entries
      r.nll.push_back(values[p - from]);
      r.top1.push_back(ranked_first[p - from]);
    }
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

nlohmann::json StreamingPerplexity::summary(int64_t segment) const {
  nlohmann::json segments = nlohmann::json::array();
  for (size_t begin = 0; begin < nll.size(); begin += segment) {
    const size_t end = std::min(nll.size(), begin + segment);
    segments.push_back({{"first", begin}, {"last", end - 1}, {"ppl", number_or_null(perplexity(nll, begin, end))}});
  }
  const size_t split = eviction_starts_at < 0 ? nll.size() : static_cast<size_t>(eviction_starts_at);
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& [length, entries] : kv.points) trace.push_back({length, entries});
  return {{"scored_tokens", nll.size()},
          {"ppl", number_or_null(perplexity(nll, 0, nll.size()))},
          {"ppl_before_eviction", number_or_null(perplexity(nll, 0, split))},
          {"ppl_after_eviction", number_or_null(perplexity(nll, split, nll.size()))},
          {"eviction_starts_at", eviction_starts_at},
          {"segments", segments},
          {"max_kv_entries", kv.max_entries},
          {"kv_entries", trace},
          {"seconds", seconds},
          {"tokens_per_second", nll.size() / std::max(seconds, 1e-9)}};
}

}  // namespace sinklm
