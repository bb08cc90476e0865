// The recall probe (eval/sinks/recall_probe.h) against references: the full cache's figures are those of one
// forward pass over the whole probe stream, a policy compared with itself agrees everywhere, and a fact
// evicted from every head of a one-layer model leaves the query's prediction exactly as it would be
// without it, whatever the weights (so a probe cannot find it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "eval/sinks/recall_probe.h"
#include "tests/model/model_test_support.h"

namespace sinklm {
namespace {

ModelConfig byte_model(const std::string& mode, int64_t layers) {
  return ModelConfig::from(testing_support::tiny_config(
      mode, {"model.vocab_size=320", "model.tokenizer_vocab_size=256", "model.max_position_embeddings=4096",
             "model.num_layers=" + std::to_string(layers)}));
}

RecallPolicy policy(const std::string& name, int64_t window) {
  CacheOptions cache;
  cache.policy = name;
  cache.window = window;
  if (name == "window") cache.sinks = 0;
  return {name, cache};
}

TEST(RecallProbe, FullCacheFiguresAreThoseOfOneForwardPassOverTheStream) {
  for (const char* mode : {"none", "token"}) {
    torch::manual_seed(3);
    const ModelConfig c = byte_model(mode, 2);
    GPTNeoXForCausalLM model(c);
    CachedDecoder decoder(model);
    const FactRecall source(FactRecallOptions{});
    RecallProbeOptions options;
    options.distances = {12};
    options.pairs = 6;
    options.chunk = 7;  // chunks that cut facts and queries
    const int64_t window = 16;
    // A window as long as the stream holds everything, as full does: the same figures, agreement 1.
    const std::vector<RecallCurve> curves =
        run_recall_probe(decoder, source, window, {policy("full", 0), policy("window", 4096)}, options);
    ASSERT_EQ(curves.size(), 2u);
    const RecallPoint& full = curves[0].points.at(0);
    const RecallPoint& wide = curves[1].points.at(0);
    EXPECT_EQ(full.queries, 6);
    EXPECT_DOUBLE_EQ(full.agreement, 1.0);
    EXPECT_DOUBLE_EQ(wide.agreement, 1.0) << mode;
    EXPECT_EQ(wide.correct, full.correct);
    EXPECT_NEAR(wide.filler_nll_after, full.filler_nll_after, 1e-4);

    // The reference: one forward pass, no cache.
    const RecallStream stream = recall_probe_stream(source, 12, window, options);
    const std::vector<int64_t> ids = with_sink_prefix(c, std::vector<int64_t>(stream.ids.begin(), stream.ids.end()));
    const int64_t offset = sink_prefix_length(c);
    torch::NoGradGuard no_grad;
    model->eval();
    auto logits = model->forward(torch::tensor(ids).unsqueeze(0))[0].to(torch::kFloat32);  // [N, V]
    auto log_probs = torch::log_softmax(logits, -1);
    double nll_before = 0, nll_after = 0;
    int64_t n_before = 0, n_after = 0, correct = 0;
    for (size_t j = 1; j < stream.ids.size(); ++j) {
      if (!stream.filler[j]) continue;
      const int64_t p = offset + static_cast<int64_t>(j) - 1;
      const double nll = -log_probs[p][static_cast<int64_t>(stream.ids[j])].item<double>();
      (p < window ? nll_before : nll_after) += nll;
      ++(p < window ? n_before : n_after);
    }
    std::vector<int64_t> predicted;  // the top-1 next token after each query's key
    for (const RecallQuery& q : stream.queries) {
      predicted.push_back(logits[offset + q.answer - 1].argmax().item<int64_t>());
      correct += predicted.back() == static_cast<int64_t>(stream.ids[q.answer]);
    }
    EXPECT_EQ(full.predicted, predicted) << mode;
    EXPECT_EQ(wide.predicted, predicted) << mode;
    EXPECT_NEAR(full.filler_nll_after, nll_after / n_after, 1e-4) << mode;
    EXPECT_NEAR(full.filler_nll_before, nll_before / n_before, 1e-4) << mode;
    EXPECT_EQ(full.correct, correct) << mode;
    EXPECT_EQ(full.kv.max_entries, static_cast<int64_t>(ids.size()));
  }
}

TEST(RecallProbe, AFactEvictedFromEveryHeadLeavesTheQueryAsIfItWereNeverStated) {
  torch::manual_seed(5);
  const ModelConfig c = byte_model("token", 1);  // one layer: no later token can carry the fact forward
  GPTNeoXForCausalLM model(c);
  CachedDecoder decoder(model);
  const FactRecall source(FactRecallOptions{});
  RecallProbeOptions options;
  options.pairs = 1;
  const int64_t window = 16;
  // Query key logits of the stream as given and with the fact's value replaced.
  auto query_logits = [&](const RecallPolicy& p, int64_t distance, bool replace_value) {
    RecallStream stream = recall_probe_stream(source, distance, window, options);
    const int64_t answer = stream.queries.at(0).answer, fact_value = answer - 1 - distance + 1;
    EXPECT_EQ(stream.ids[fact_value], stream.ids[answer]);
    if (replace_value) stream.ids[fact_value] = stream.ids[fact_value] == 'a' ? 'b' : 'a';
    std::vector<int64_t> ids = with_sink_prefix(c, std::vector<int64_t>(stream.ids.begin(), stream.ids.end()));
    CacheOptions cache = p.cache;
    if (cache.policy == "full") cache.window = static_cast<int64_t>(ids.size());
    torch::Tensor kept;
    stream_logits(decoder, make_cache_policy(cache, c), cache.positions, KeyRotation::Relative, ids, 5, 5,
                  [&](int64_t first, const torch::Tensor& logits) {
      const int64_t row = sink_prefix_length(c) + answer - 1 - first;
      if (row >= 0 && row < logits.size(0)) kept = logits[row].clone();
    });
    return kept;
  };
  for (const char* name : {"window", "sink_window"}) {
    const RecallPolicy p = policy(name, window);
    EXPECT_TRUE(torch::equal(query_logits(p, 40, false), query_logits(p, 40, true))) << name << ": evicted, d = 40";
    EXPECT_FALSE(torch::equal(query_logits(p, 8, false), query_logits(p, 8, true))) << name << ": held, d = 8";
  }
  EXPECT_FALSE(torch::equal(query_logits(policy("full", 0), 40, false), query_logits(policy("full", 0), 40, true)));
}

TEST(RecallProbe, DefaultDistancesRunFromInsideTheCacheToFourCachesBack) {
  EXPECT_EQ(default_recall_distances(64), (std::vector<int64_t>{8, 16, 32, 48, 56, 72, 80, 96, 128, 256}));
  EXPECT_EQ(default_recall_distances(8).front(), 4);
}

}  // namespace
}  // namespace sinklm
