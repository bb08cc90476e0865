#include "model/model_config.h"

#include <gtest/gtest.h>

#include "model/gpt_neox.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

ModelConfig preset(const std::string& name) {
  return ModelConfig::from(Config::load_file(std::string(SINKLM_SOURCE_DIR) + "/configs/" + name + ".yaml"));
}

TEST(ParameterCount, Pythia160mIsThePublishedCount) {
  auto count = count_parameters(preset("pythia-160m"));
  EXPECT_EQ(count.total, 162322944);
  EXPECT_EQ(count.non_embedding(), 85056000);  // Pythia's "non-embedding params"
  EXPECT_EQ(count_parameters(preset("pythia-160m-sink")).total, 162322944);
}

TEST(ParameterCount, Pythia70mIsThePublishedCount) { EXPECT_EQ(count_parameters(preset("pythia-70m")).total, 70426624); }

TEST(ParameterCount, AnalyticCountEqualsTheBuiltModelForEveryVariant) {
  for (const std::string& mode : testing_support::sink_mode_names()) {
    ModelConfig mc = ModelConfig::from(testing_support::tiny_config(mode, {"model.parallel_residual=false"}));
    GPTNeoXForCausalLM model(mc);
    int64_t numel = 0;
    for (const auto& p : model->parameters()) numel += p.numel();
    EXPECT_EQ(numel, count_parameters(mc).total) << mode;
  }
}

TEST(ModelConfig, PresetsResolve) {
  for (const char* name : {"tiny", "tiny-sink", "small", "small-sink", "pythia-70m", "pythia-160m-sink"}) {
    ModelConfig mc = preset(name);
    EXPECT_EQ(mc.rotary_dims(), mc.head_dim() / 4) << name;
  }
  EXPECT_EQ(preset("pythia-160m-sink").sink_token_id(0), 50277);
}

TEST(ModelConfig, HeadsMustDivideWidth) {
  auto msg = testing_support::user_error_of(
      [] { ModelConfig::from(testing_support::tiny_config("none", {"model.num_heads=5"})); });
  EXPECT_NE(msg.find("model.hidden_size (32) must be divisible by model.num_heads (5)"), std::string::npos) << msg;
}

TEST(GPTNeoX, InitialisationIsDeterministicAndFollowsNeoX) {
  ModelConfig mc = ModelConfig::from(testing_support::tiny_config("none"));
  GPTNeoXForCausalLM a(mc), b(mc);
  for (const auto& p : a->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), b->named_parameters()[p.key()])) << p.key();
  auto qkv = a->named_parameters()["gpt_neox.layers.0.attention.query_key_value.weight"];
  auto dense = a->named_parameters()["gpt_neox.layers.0.attention.dense.weight"];
  EXPECT_NEAR(qkv.std().item<double>(), std::sqrt(2.0 / (5 * 32)), 0.02);
  EXPECT_NEAR(dense.std().item<double>(), 2.0 / (2 * std::sqrt(32.0)), 0.03);
  EXPECT_EQ(a->named_parameters()["gpt_neox.layers.1.attention.query_key_value.bias"].abs().sum().item<float>(), 0);
}

TEST(GPTNeoX, ExplicitPositionsMatchDefaultAndShiftChangesOutput) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("none")));
  auto ids = testing_support::random_ids(1, 6, 60);
  auto a = model->forward(ids), b = model->forward(ids, torch::arange(6));
  EXPECT_TRUE(torch::equal(a, b));
  // Rotary embeddings only depend on relative positions within the attention, so shifting every
  // position by the same amount leaves the output unchanged (up to float rounding of angles).
  auto shifted = model->forward(ids, torch::arange(6) + 40);
  EXPECT_TRUE(torch::allclose(a, shifted, 1e-4, 1e-4)) << (a - shifted).abs().max();
  auto gapped = model->forward(ids, torch::tensor({0, 1, 2, 10, 11, 12}));
  EXPECT_FALSE(torch::allclose(a, gapped, 1e-4, 1e-4));
}

}  // namespace
}  // namespace sinklm
