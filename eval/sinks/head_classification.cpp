#include "eval/sinks/head_classification.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "model/analysis/attention_probe.h"

namespace sinklm {

torch::Tensor mass_beyond_window(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                 int64_t sinks, int64_t window) {
  const ModelConfig& c = model->config();
  SINKLM_ASSERT(!segments.empty() && sinks < window, "segments ", segments.size(), " sinks ", sinks, " window ", window);
  const int64_t T = static_cast<int64_t>(segments[0].size());
  SINKLM_ASSERT(T > window, "segments of ", T, " tokens, not longer than the window ", window);
  // evicted[q, j]: key j is neither a sink nor one of the W - S most recent keys of query q (q >= W only).
  auto q = torch::arange(T, torch::kInt64).unsqueeze(1), j = torch::arange(T, torch::kInt64).unsqueeze(0);
  auto evicted = (j.ge(sinks) & j.le(q - (window - sinks))).to(torch::kFloat64).narrow(0, window, T - window);  // [Q, T]
  auto mass = torch::zeros({c.num_layers, c.num_heads}, torch::kFloat64);
  const torch::Device device = model->embed_out->weight.device();
  for (const auto& ids : segments) {
    SINKLM_ASSERT(static_cast<int64_t>(ids.size()) == T, "segments of different lengths");
    const AttentionRecord record = record_attention(model, torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device));
    for (int64_t l = 0; l < c.num_layers; ++l) {
      auto rows = record.probabilities[l].to(torch::kFloat64).narrow(1, window, T - window);  // [H, Q, T]
      mass[l] += (rows * evicted).sum(2).mean(1);
    }
  }
  return mass / static_cast<double>(segments.size());
}

torch::Tensor recall_loss_per_head(CachedDecoder& decoder, const FactRecall& source, const CacheOptions& cache,
                                   const RecallProbeOptions& options) {
  const ModelConfig& c = decoder.config();
  const int64_t L = c.num_layers, H = c.num_heads;
  auto policy_of = [&](int64_t restricted) {  // every head retrieval but `restricted` (-1: none)
    HeadRoles roles{L, H, std::vector<std::vector<int64_t>>(L)};
    for (int64_t i = 0; i < L * H; ++i)
      if (i != restricted) roles.retrieval[i / H].push_back(i % H);
    CacheOptions o = cache;
    o.policy = "heads";
    o.head_roles = std::make_shared<HeadRoles>(std::move(roles));
    return RecallPolicy{restricted < 0 ? "every head R" : str("head ", restricted / H, ".", restricted % H, " at W"), o};
  };
  std::vector<RecallPolicy> policies{policy_of(-1)};
  for (int64_t i = 0; i < L * H; ++i) policies.push_back(policy_of(i));
  const auto curves = run_recall_probe(decoder, source, cache.window, policies, options);
  auto accuracy = [](const RecallCurve& curve) {
    int64_t correct = 0, queries = 0;
    for (const auto& p : curve.points) correct += p.correct, queries += p.queries;
    return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(queries, 1));
  };
  auto loss = torch::zeros({L, H}, torch::kFloat64);
  for (int64_t i = 0; i < L * H; ++i) loss[i / H][i % H] = accuracy(curves[0]) - accuracy(curves[i + 1]);
  return loss;
}

HeadRoles top_scoring_heads(const torch::Tensor& scores, int64_t count) {
  const int64_t L = scores.size(0), H = scores.size(1);
  SINKLM_ASSERT(count >= 0 && count <= L * H, "count ", count);
  auto flat = scores.to(torch::kFloat64).contiguous();
  const double* s = flat.data_ptr<double>();
  std::vector<int64_t> order(L * H);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
  HeadRoles roles{L, H, std::vector<std::vector<int64_t>>(L)};
  for (int64_t i = 0; i < count; ++i) roles.retrieval[order[i] / H].push_back(order[i] % H);
  for (auto& heads : roles.retrieval) std::sort(heads.begin(), heads.end());
  return roles;
}

namespace {

std::vector<std::vector<double>> score_rows(const torch::Tensor& score) {
  std::vector<std::vector<double>> rows(score.size(0));
  for (int64_t l = 0; l < score.size(0); ++l)
    for (int64_t h = 0; h < score.size(1); ++h) rows[l].push_back(score[l][h].item<double>());
  return rows;
}

}  // namespace

HeadClassification classify_heads(CachedDecoder& decoder, const std::vector<std::vector<int64_t>>& segments,
                                  const FactRecall* source, const HeadClassificationOptions& options) {
  const ModelConfig& c = decoder.config();
  const int64_t L = c.num_layers, H = c.num_heads;
  const CacheOptions& cache = options.cache;
  const int64_t W = cache.window, S = cache.sinks, R = cache.retrieval_window;
  const int64_t count = options.retrieval_heads >= 0 ? options.retrieval_heads : (L * H + 3) / 4;
  HeadClassification result;
  result.score = !options.score.empty() ? options.score : source ? "recall-loss" : "attention-mass";
  SINKLM_ASSERT(!segments.empty() && R > W, "segments ", segments.size(), " W ", W, " R ", R);
  const int64_t T = static_cast<int64_t>(segments[0].size());
  if (S >= W) fail("--sinks ", S, ": must be in [0, --window ", W, ")");
  if (T <= W) fail("--tokens ", T, ": the segments must be longer than --window ", W, " (nothing is evicted before W)");
  if (count > L * H) fail("--retrieval-heads ", count, ": must be in [0, ", L * H, "]");
  if (result.score != "recall-loss" && result.score != "attention-mass")
    fail("--score ", result.score, ": expected recall-loss or attention-mass");
  if (result.score == "recall-loss" && !source) fail("--score recall-loss needs a recall source (--recall DIR)");

  result.calibration = {{"window", W}, {"sinks", S}, {"retrieval_window", R}, {"positions", position_rule_name(cache.positions)},
                        {"attention_mass", {{"segments", segments.size()}, {"tokens_per_segment", T}}}};
  result.mass = mass_beyond_window(decoder.model(), segments, S, W);
  torch::Tensor chosen = result.mass;
  if (source) {
    RecallProbeOptions probe = options.probe;
    if (probe.distances.empty()) probe.distances = {W + (R - W) / 4, W + (R - W) / 2, W + 3 * (R - W) / 4};
    result.loss = recall_loss_per_head(decoder, *source, cache, probe);
    result.calibration["seed"] = probe.seed;  // of the attention-mass stream and of the recall-loss probe
    result.calibration["recall_loss"] = {{"distances", probe.distances}, {"pairs", probe.pairs}, {"seed", probe.seed}};
    if (result.score == "recall-loss") chosen = result.loss;
  }
  result.roles = top_scoring_heads(chosen, count);
  return result;
}

nlohmann::json head_classification_json(const HeadClassification& result) {
  nlohmann::json file = head_roles_json(result.roles);
  file["score"] = result.score;
  file["scores"]["attention_mass"] = score_rows(result.mass);
  if (result.loss.defined()) file["scores"]["recall_loss"] = score_rows(result.loss);
  file["calibration"] = result.calibration;
  return file;
}

}  // namespace sinklm
