// The output-gate statistics of model/attention_mass.h (what `sinklm analyze` and the training probe report
// for a gated model) against the gates computed by hand from layer 0's own modules.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention_mass.h"
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

TEST(AttentionMass, NoGateStatisticsWithoutAGate) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("kv")));
  const AttentionMass mass = measure_attention_mass(model, {std::vector<int64_t>(12, 3)}, 1, 0);
  EXPECT_FALSE(mass.statistic("gate_mean").defined());
}

}  // namespace
}  // namespace sinklm
