// Head classification (eval/sinks/head_classification.h): the attention mass beyond sinks + window against the
// attention rows themselves, and the choice of the top heads. The recall loss is exercised where it can
// matter, on a trained recall model (tests/train/science_recall_test.py: the heads it picks keep the facts).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "eval/sinks/head_classification.h"
#include "model/analysis/attention_probe.h"
#include "tests/model/model_test_support.h"

namespace sinklm {
namespace {

GPTNeoXForCausalLM random_model(const std::string& mode, std::vector<std::string> overrides = {}) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config(mode, std::move(overrides))));
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (auto& p : model->parameters()) p.add_(torch::randn(p.sizes()) * 0.3);
  model->eval();
  return model;
}

// A vanilla row sums to 1: what is not on the sinks or the W - S most recent keys is beyond the window.
TEST(HeadClassification, MassBeyondWindowIsWhatSinksAndRecentKeysLeave) {
  auto model = random_model("none");
  const int64_t T = 40, W = 12, S = 2, L = model->config().num_layers, H = model->config().num_heads;
  std::vector<std::vector<int64_t>> segments;
  for (uint64_t s = 0; s < 2; ++s) {
    auto ids = testing_support::random_ids(1, T, 60, 20 + s)[0];
    segments.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + T);
  }
  const torch::Tensor mass = mass_beyond_window(model, segments, S, W);
  auto expected = torch::zeros({L, H}, torch::kFloat64);
  for (const auto& ids : segments) {
    const auto record = record_attention(model, torch::tensor(ids).unsqueeze(0));
    for (int64_t l = 0; l < L; ++l)
      for (int64_t q = W; q < T; ++q) {
        auto row = record.probabilities[l].select(1, q).to(torch::kFloat64);  // [H, T]
        auto kept = row.narrow(1, 0, S).sum(1) + row.narrow(1, q - (W - S) + 1, W - S).sum(1);
        expected[l] += (1 - kept) / static_cast<double>((T - W) * segments.size());
      }
  }
  EXPECT_TRUE(torch::allclose(mass, expected, 1e-6, 1e-9)) << mass << "\n" << expected;
  EXPECT_GT(mass.min().item<double>(), 0.01);  // a random model looks everywhere: the check is not vacuous
}

TEST(HeadClassification, TopScoringHeadsAreTheLargestAndTiesGoToTheEarlierHead) {
  const auto scores = torch::tensor({0.1, 0.5, 0.5, 0.0, 0.9, 0.2}, torch::kFloat64).view({2, 3});
  const HeadRoles roles = top_scoring_heads(scores, 3);
  EXPECT_EQ(roles.retrieval, (std::vector<std::vector<int64_t>>{{1, 2}, {1}}));
  EXPECT_EQ(top_scoring_heads(scores, 2).retrieval, (std::vector<std::vector<int64_t>>{{1}, {1}}));
  EXPECT_EQ(top_scoring_heads(scores, 0).retrieval_heads(), 0);
}

// classify_heads (what `analyze --classify-heads` runs): by attention mass without a recall source, the K
// heads of most mass; its file names the score and the calibration; flags that do not fit are refused by name.
TEST(HeadClassification, ClassifyHeadsKeepsTheHeadsOfMostMassAndNamesWhatDoesNotFit) {
  auto model = random_model("none");
  CachedDecoder decoder(model);
  const int64_t T = 40;
  std::vector<std::vector<int64_t>> segments;
  for (uint64_t s = 0; s < 2; ++s) {
    auto ids = testing_support::random_ids(1, T, 60, 30 + s)[0];
    segments.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + T);
  }
  HeadClassificationOptions options;
  options.cache.policy = "heads";
  options.cache.window = 12;
  options.cache.sinks = 2;
  options.cache.retrieval_window = 48;
  options.retrieval_heads = 3;
  const HeadClassification result = classify_heads(decoder, segments, nullptr, options);
  EXPECT_EQ(result.score, "attention-mass");
  EXPECT_EQ(result.roles.retrieval, top_scoring_heads(mass_beyond_window(model, segments, 2, 12), 3).retrieval);
  EXPECT_EQ(result.roles.retrieval_heads(), 3);
  const auto file = head_classification_json(result);
  EXPECT_EQ(file["score"], "attention-mass");
  EXPECT_EQ(file["calibration"]["retrieval_window"], 48);
  EXPECT_FALSE(file["scores"].contains("recall_loss"));

  auto refused = [&](HeadClassificationOptions o) {
    return testing_support::user_error_of([&] { classify_heads(decoder, segments, nullptr, o); });
  };
  HeadClassificationOptions o = options;
  o.score = "recall-loss";
  EXPECT_NE(refused(o).find("--score recall-loss needs a recall source"), std::string::npos);
  o = options;
  o.retrieval_heads = 1000;
  EXPECT_NE(refused(o).find("--retrieval-heads 1000"), std::string::npos);
  o = options;
  o.cache.window = 40;
  EXPECT_NE(refused(o).find("--tokens 40"), std::string::npos);
}

}  // namespace
}  // namespace sinklm
