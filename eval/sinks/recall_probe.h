// The recall probe: what a bounded cache does not keep (StreamingLLM's StreamEval, in token form).
//
// Probe streams of the recall source (data/synthetic/fact_recall.h) plant facts exactly d tokens before
// their queries, for a grid of d from well inside the cache to several caches back. Every stream first
// runs W filler tokens, so every query comes after the cache began to evict. Each stream goes through every
// cache policy (same position rule) and, per policy and d, the probe measures:
//   accuracy     share of queries whose answer is the model's top-1 next token after the query's key
//                (chance: one over the value symbols)
//   filler NLL   mean NLL of the filler tokens predicted before stream position W (where a cache of W
//                entries first evicts) and from it on; the same split for every policy
//   agreement    share of positions whose top-1 next token equals that of the reference policy (the first
//                one, `full` by default) on the same stream: output stability, teacher-forced
//   KV entries   the most held, and the trace over the stream; K/V bytes per stream (all layers and heads,
//                the measure of memory when heads keep different budgets)
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "data/synthetic/fact_recall.h"
#include "eval/sinks/streaming_perplexity.h"
#include "decode/cached_decoder.h"

namespace sinklm {

struct RecallProbeOptions {
  std::vector<int64_t> distances;  // fact-to-query distances, each >= 4
  int64_t pairs = 48;              // facts (and queries) per distance
  int64_t chunk = 256;             // prefill chunk
  uint64_t seed = 0;               // probe streams' seed (the source's own seed fixes the filler chain)
};

// Cache policies to compare; policies[0] is the reference of `agreement`. A `full` policy's limit is set
// per stream to that stream's length.
struct RecallPolicy {
  std::string label;  // e.g. "full", "window 0+64", "sink_window 1+63", "heads 1+31/1+127"
  CacheOptions cache;
};

struct RecallPoint {
  int64_t distance = 0;
  int64_t queries = 0, correct = 0;
  std::vector<int64_t> predicted;  // per query: the top-1 next token after its key (correct when the value)
  double filler_nll_before = 0, filler_nll_after = 0;  // NaN when the stream has no such filler
  double agreement = 0;
  KvTrace kv;  // the most entries held, and the trace
  double accuracy() const { return queries ? static_cast<double>(correct) / static_cast<double>(queries) : 0; }
};

struct RecallCurve {
  RecallPolicy policy;
  int64_t budget = 0;          // W (full: the longest stream; heads: the retrieval budget)
  int64_t kv_bytes = 0;        // the most K/V bytes one stream held (kv_bytes_per_stream)
  std::vector<RecallPoint> points;
};

// "full", or the policy's name and label: "window 0+64", "sink_window 1+63", "heads 1+31/1+127".
std::string recall_policy_label(const CacheOptions& cache, const ModelConfig& model);

// Defaults for a cache of W entries: d = W/8, W/4, W/2, 3W/4, W - 8, W + 8, 5W/4, 3W/2, 2W, 4W (at least 4,
// no repeats, ascending).
std::vector<int64_t> default_recall_distances(int64_t window);

// The probe stream of `distance`: W filler tokens, then options.pairs facts each asked `distance` later
// (without the sink prefix, which the probe puts first for token models).
RecallStream recall_probe_stream(const FactRecall& source, int64_t distance, int64_t window,
                                 const RecallProbeOptions& options);

// UserError naming the probe's stream when a distance is below 4 or there are no policies.
std::vector<RecallCurve> run_recall_probe(CachedDecoder& decoder, const FactRecall& source, int64_t window,
                                          const std::vector<RecallPolicy>& policies, const RecallProbeOptions& options);

// JSON: options, chance, and per policy the points (accuracy, filler NLL, agreement, KV entries).
nlohmann::json recall_probe_json(const std::vector<RecallCurve>& curves, const FactRecall& source, int64_t window,
                                 const RecallProbeOptions& options);
// A markdown table: accuracy per distance (columns) and policy (rows), chance and W in the caption.
std::string recall_probe_table(const std::vector<RecallCurve>& curves, const FactRecall& source, int64_t window);

}  // namespace sinklm
