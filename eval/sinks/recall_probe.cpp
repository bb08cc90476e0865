#include "eval/sinks/recall_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/progress_meter.h"
#include "core/seeded_random.h"
#include "model/kernels/token_scores.h"

namespace sinklm {
namespace {

double mean_or_nan(double sum, int64_t count) { return count ? sum / static_cast<double>(count) : std::nan(""); }
nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

// One policy over one probe stream: per stream position p, the top-1 next token and the NLL of ids[p + 1].
struct PolicyRun {
  std::vector<int64_t> top1;
  std::vector<float> nll;
  KvTrace kv;
  int64_t budget = 0, kv_bytes = 0;
};

PolicyRun run_policy(CachedDecoder& decoder, CacheOptions cache, const std::vector<int64_t>& ids, int64_t chunk) {
  if (cache.policy == "full") cache.window = static_cast<int64_t>(ids.size());
  std::shared_ptr<const KvCachePolicy> policy = make_cache_policy(cache, decoder.config(), "--recall-policies");
  PolicyRun run;
  run.budget = policy->budget();
  run.kv_bytes = kv_bytes_per_stream(*policy, decoder.config(), static_cast<int64_t>(ids.size()));
  run.top1.assign(ids.size(), -1);
  run.nll.assign(ids.size(), 0);
  run.kv = stream_logits(decoder, policy, cache.positions, KeyRotation::Relative, ids, chunk, chunk,
                         [&](int64_t first, const torch::Tensor& logits) {  // [T, V]
    const int64_t rows = std::min<int64_t>(logits.size(0), static_cast<int64_t>(ids.size()) - 1 - first);
    if (rows <= 0) return;
    auto scored = logits.narrow(0, 0, rows);
    const auto [nll, top1] = token_scores(scored, {ids.begin() + first + 1, ids.begin() + first + 1 + rows});
    std::copy_n(top1.data_ptr<int64_t>(), rows, run.top1.begin() + first);
    std::copy_n(nll.data_ptr<float>(), rows, run.nll.begin() + first);
  });
  return run;
}

// Filler NLL is split at stream position W, the same for every policy: before it no cache of the probe's
// budget has evicted, from it on window and sink_window have (full never does: its "after" is the reference).
RecallPoint measure(const RecallStream& stream, int64_t offset, const PolicyRun& run, const PolicyRun& reference,
                    int64_t distance, int64_t window) {
  RecallPoint point;
  point.distance = distance;
  for (const RecallQuery& q : stream.queries) {
    ++point.queries;
    point.predicted.push_back(run.top1[static_cast<size_t>(offset + q.answer - 1)]);
    point.correct += point.predicted.back() == static_cast<int64_t>(stream.ids[q.answer]);
  }
  double before = 0, after = 0;
  int64_t n_before = 0, n_after = 0, same = 0, compared = 0;
  for (size_t j = 1; j < stream.ids.size(); ++j) {
    const int64_t p = offset + static_cast<int64_t>(j) - 1;  // the position that predicts text token j
    same += run.top1[p] == reference.top1[p];
    ++compared;
    if (!stream.filler[j]) continue;
    if (p < window) before += run.nll[p], ++n_before;
    else after += run.nll[p], ++n_after;
  }
  point.filler_nll_before = mean_or_nan(before, n_before);
  point.filler_nll_after = mean_or_nan(after, n_after);
  point.agreement = static_cast<double>(same) / static_cast<double>(std::max<int64_t>(compared, 1));
  point.kv = run.kv;
  return point;
}

}  // namespace

std::string recall_policy_label(const CacheOptions& cache, const ModelConfig& model) {
  if (cache.policy == "full") return "full";
  auto policy = make_cache_policy(cache, model, "--recall-policies");
  return policy->name() + " " + policy->label();
}

std::vector<int64_t> default_recall_distances(int64_t window) {
  std::vector<int64_t> d = {window / 8, window / 4, window / 2, 3 * window / 4, window - 8,
                            window + 8, 5 * window / 4, 3 * window / 2, 2 * window, 4 * window};
  for (int64_t& x : d) x = std::max<int64_t>(x, 4);
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

RecallStream recall_probe_stream(const FactRecall& source, int64_t distance, int64_t window,
                                 const RecallProbeOptions& options) {
  return source.probe(distance, options.pairs, window, /*tail=*/8, seeded_hash(options.seed, std::to_string(distance)));
}

std::vector<RecallCurve> run_recall_probe(CachedDecoder& decoder, const FactRecall& source, int64_t window,
                                          const std::vector<RecallPolicy>& policies, const RecallProbeOptions& options) {
  if (policies.empty()) fail("recall probe: no cache policies given");
  const ModelConfig& model = decoder.config();
  std::vector<RecallCurve> curves;
  for (const RecallPolicy& p : policies) curves.push_back({p, 0, {}});
  ProgressMeter progress("[recall] policies x distances", policies.size() * options.distances.size(), "streams");
  uint64_t streams = 0;
  for (const int64_t distance : options.distances) {
    if (distance < 4) fail("recall probe: distance ", distance, " is below 4 (a query comes after its fact)");
    const RecallStream stream = recall_probe_stream(source, distance, window, options);
    const std::vector<int64_t> ids = with_sink_prefix(model, std::vector<int64_t>(stream.ids.begin(), stream.ids.end()));
    const int64_t offset = sink_prefix_length(model);
    std::fprintf(stderr, "[recall] d = %lld: %zu tokens, %zu queries\n", static_cast<long long>(distance), ids.size(),
                 stream.queries.size());
    const PolicyRun reference = run_policy(decoder, policies[0].cache, ids, options.chunk);
    for (size_t i = 0; i < policies.size(); ++i) {
      const PolicyRun run = i == 0 ? reference : run_policy(decoder, policies[i].cache, ids, options.chunk);
      curves[i].budget = std::max(curves[i].budget, run.budget);
      curves[i].kv_bytes = std::max(curves[i].kv_bytes, run.kv_bytes);
      curves[i].points.push_back(measure(stream, offset, run, reference, distance, window));
      progress.update(++streams);
    }
  }
  progress.finish();
  return curves;
}

nlohmann::json recall_probe_json(const std::vector<RecallCurve>& curves, const FactRecall& source, int64_t window,
                                 const RecallProbeOptions& options) {
  nlohmann::json out = {{"window", window}, {"chance", 1.0 / static_cast<double>(source.options().symbols)},
                        {"pairs", options.pairs}, {"seed", options.seed}, {"distances", options.distances},
                        {"source", recall_options_json(source.options())}, {"reference", curves.at(0).policy.label},
                        {"policies", nlohmann::json::array()}};
  for (const RecallCurve& c : curves) {
    nlohmann::json points = nlohmann::json::array();
    for (const RecallPoint& p : c.points) {
      nlohmann::json trace = nlohmann::json::array();
      for (const auto& [length, entries] : p.kv.points) trace.push_back({length, entries});
      points.push_back({{"distance", p.distance}, {"queries", p.queries}, {"correct", p.correct},
                        {"accuracy", p.accuracy()}, {"filler_nll_before_eviction", number_or_null(p.filler_nll_before)},
                        {"filler_nll_after_eviction", number_or_null(p.filler_nll_after)},
                        {"agreement_with_reference", p.agreement}, {"max_kv_entries", p.kv.max_entries},
                        {"kv_entries", trace}});
    }
    nlohmann::json policy = {{"label", c.policy.label}, {"cache", c.policy.cache.policy},
                             {"positions", position_rule_name(c.policy.cache.positions)}, {"budget", c.budget},
                             {"kv_bytes_per_stream", c.kv_bytes}, {"points", points}};
    if (const auto& roles = c.policy.cache.head_roles)
      policy["head_policy"] = {{"file", roles->source}, {"retrieval_heads", roles->retrieval_heads()}};
    out["policies"].push_back(policy);
  }
  return out;
}

std::string recall_probe_table(const std::vector<RecallCurve>& curves, const FactRecall& source, int64_t window) {
  std::string out = str("Recall accuracy by fact-to-query distance d (cache W = ", window, ", chance ",
                        1.0 / static_cast<double>(source.options().symbols), "):\n\n| policy |");
  std::string rule = "|---|";
  for (const RecallPoint& p : curves.at(0).points) {
    out += str(" d=", p.distance, p.distance > window ? " (>W)" : "", " |");
    rule += "---|";
  }
  out += " filler NLL after eviction | agreement with " + curves[0].policy.label + " | K/V KiB per stream |\n" + rule +
         "---|---|---:|\n";
  for (const RecallCurve& c : curves) {
    out += "| " + c.policy.label + " |";
    double nll = 0, agreement = 0;
    int64_t n = 0;
    for (const RecallPoint& p : c.points) {
      char cell[32];
      std::snprintf(cell, sizeof cell, " %.2f |", p.accuracy());
      out += cell;
      if (std::isfinite(p.filler_nll_after)) nll += p.filler_nll_after, ++n;
      agreement += p.agreement;
    }
    char tail[96];
    std::snprintf(tail, sizeof tail, " %.3f | %.3f | %.1f |\n", mean_or_nan(nll, n),
                  agreement / static_cast<double>(std::max<size_t>(c.points.size(), 1)),
                  static_cast<double>(c.kv_bytes) / 1024.0);
    out += tail;
  }
  return out;
}

}  // namespace sinklm
