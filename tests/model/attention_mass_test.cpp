// What model/analysis/attention_mass.h reports (`sinklm analyze` and the training probe) against values computed by
// hand from layer 0's own modules: the output gates of a gated model, the value norms, the query classes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/attention_mass.h"
#include "model/analysis/attention_probe.h"
#include "model/sink.h"
#include "tests/model/model_test_support.h"

namespace sinklm {
namespace {

TEST(AttentionMass, GateStatisticsAreLayerZerosGatesComputedByHand) {
  for (const char* gate : {"headwise", "elementwise"}) {
    const ModelConfig c = ModelConfig::from(testing_support::tiny_config("gated", {std::string("model.sink.gate=") + gate}));
    GPTNeoXForCausalLM model(c);
    testing_support::randomize_sink_parameters(model);
    const auto ids = testing_support::random_ids(2, 16, c.tokenizer_vocab_size);  // two segments of 16
    std::vector<std::vector<int64_t>> segments;
    for (int64_t s = 0; s < 2; ++s) segments.emplace_back(ids[s].data_ptr<int64_t>(), ids[s].data_ptr<int64_t>() + 16);
    const AttentionMass mass = measure_attention_mass(model, segments, /*first=*/1, /*map_tokens=*/0);
    const torch::Tensor gate_mean = mass.statistic("gate_mean"), gate_dormant = mass.statistic("gate_dormant");
    ASSERT_TRUE(gate_mean.defined() && gate_dormant.defined()) << gate;

    torch::NoGradGuard no_grad;
    auto layer = model->gpt_neox->layers->ptr<GPTNeoXLayerImpl>(0);
    auto x = layer->input_layernorm(model->gpt_neox->embed_in(ids));                     // [2, 16, C]
    auto g = torch::sigmoid(layer->attention->gate(x)).to(torch::kFloat64).view({32, c.num_heads, -1});  // [tokens, H, width / H]
    const auto mean = g.mean(std::vector<int64_t>{0, 2}), dormant = g.lt(kDormantGate).to(torch::kFloat64).mean(std::vector<int64_t>{0, 2});
    EXPECT_TRUE(torch::allclose(gate_mean[0], mean, 1e-6, 1e-7)) << gate << gate_mean[0] << mean;
    EXPECT_TRUE(torch::allclose(gate_dormant[0], dormant, 0, 1e-12)) << gate;
    EXPECT_GT(dormant.max().item<double>(), 0.0) << gate << ": the randomised gates should close some heads";
  }
}

// Layer 0's value vectors computed from its own modules: [B, T, H, D].
torch::Tensor layer0_values(GPTNeoXForCausalLM& model, const torch::Tensor& ids) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  auto layer = model->gpt_neox->layers->ptr<GPTNeoXLayerImpl>(0);
  auto qkv = layer->attention->query_key_value(layer->input_layernorm(model->gpt_neox->embed_in(ids)));
  return qkv.view({ids.size(0), ids.size(1), c.num_heads, 3 * c.head_dim()}).narrow(3, 2 * c.head_dim(), c.head_dim());
}

TEST(AttentionMass, ValueNormsAreLayerZerosValuesComputedByHand) {
  for (const char* mode : {"token", "kv", "softmax1", "none"}) {
    const ModelConfig c = ModelConfig::from(testing_support::tiny_config(mode));
    GPTNeoXForCausalLM model(c);
    testing_support::randomize_sink_parameters(model);
    auto ids = testing_support::random_ids(1, 16, c.tokenizer_vocab_size);
    if (c.sink_mode == SinkMode::Token) ids[0][0] = sink_prefix(c)[0];
    const AttentionMass mass = measure_attention_mass(model, {{ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 16}}, 1, 0);
    const auto norms = layer0_values(model, ids)[0].to(torch::kFloat64).norm(2, -1);  // [T, H]
    const int64_t text = sink_prefix_length(c);
    EXPECT_TRUE(torch::allclose(mass.value_norm[0], norms.narrow(0, text, 16 - text).mean(0), 1e-5, 1e-6)) << mode;
    torch::Tensor sink;
    if (c.sink_mode == SinkMode::KeyValue) sink = model->sink_parameters()[1].tensor.to(torch::kFloat64).norm(2, -1);
    else if (c.sink_mode == SinkMode::Softmax1) sink = torch::zeros({c.num_heads}, torch::kFloat64);
    else sink = norms[0];  // the sink token, or a vanilla model's position 0
    EXPECT_TRUE(torch::allclose(mass.sink_value_norm[0], sink, 1e-5, 1e-6)) << mode << mass.sink_value_norm[0] << sink;
  }
}

TEST(AttentionMass, QueryClassesSplitTheSinkMass) {
  const ModelConfig c = ModelConfig::from(testing_support::tiny_config("token"));
  GPTNeoXForCausalLM model(c);
  auto ids = testing_support::random_ids(1, 16, c.tokenizer_vocab_size);
  ids[0][0] = sink_prefix(c)[0];
  const std::vector<std::vector<int64_t>> segments = {{ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 16}};
  const AttentionMass all = measure_attention_mass(model, segments, 1, 0, {std::vector<bool>(16, true)});
  EXPECT_TRUE(torch::allclose(all.sink_trigger, all.sink, 1e-12, 1e-12));
  EXPECT_EQ(all.trigger_queries, 8);
  EXPECT_EQ(all.other_queries, 0);
  std::vector<bool> alternate(16);
  for (int64_t q = 0; q < 16; ++q) alternate[q] = q % 2 == 0;
  const AttentionMass split = measure_attention_mass(model, segments, 1, 0, {alternate});
  EXPECT_TRUE(torch::allclose((split.sink_trigger + split.sink_other) / 2, split.sink, 1e-12, 1e-12));
  EXPECT_FALSE(torch::allclose(split.sink_trigger, split.sink_other, 1e-6, 1e-6));
  EXPECT_FALSE(measure_attention_mass(model, segments, 1, 0).sink_trigger.defined());
}

// Each layer's map is that layer's own attention, averaged over heads and segments: its rows are
// probabilities (a vanilla causal row over the first M keys sums to 1) and the layers differ.
TEST(AttentionMass, EachLayerHasItsOwnMap) {
  const ModelConfig c = ModelConfig::from(testing_support::tiny_config("none"));
  GPTNeoXForCausalLM model(c);
  const auto ids = testing_support::random_ids(2, 16, c.tokenizer_vocab_size);
  std::vector<std::vector<int64_t>> segments;
  for (int64_t s = 0; s < 2; ++s) segments.emplace_back(ids[s].data_ptr<int64_t>(), ids[s].data_ptr<int64_t>() + 16);
  const int64_t M = 8;
  const AttentionMass mass = measure_attention_mass(model, segments, /*first=*/1, M);
  ASSERT_EQ(mass.maps.size(), static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    torch::Tensor want = torch::zeros({M, M}, torch::kFloat64);
    for (int64_t s = 0; s < 2; ++s)
      want += record_attention(model, ids[s].unsqueeze(0)).probabilities[l].to(torch::kFloat64).narrow(1, 0, M).narrow(2, 0, M).mean(0);
    want /= 2.0;
    EXPECT_TRUE(torch::allclose(mass.maps[l], want, 1e-6, 1e-9)) << "layer " << l;
    EXPECT_TRUE(torch::allclose(mass.maps[l].sum(1), torch::ones({M}, torch::kFloat64), 1e-6, 1e-6)) << "layer " << l << " rows sum to "
        << mass.maps[l].sum(1);
  }
  EXPECT_FALSE(torch::allclose(mass.maps[0], mass.maps[1])) << "layers 0 and 1 share one map";
}

TEST(AttentionMass, NoGateStatisticsWithoutAGate) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("kv")));
  const AttentionMass mass = measure_attention_mass(model, {std::vector<int64_t>(12, 3)}, 1, 0);
  EXPECT_FALSE(mass.statistic("gate_mean").defined());
}

}  // namespace
}  // namespace sinklm
