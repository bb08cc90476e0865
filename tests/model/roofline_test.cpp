// The roofline bench-decode prints beside its figure (model/analysis/roofline.h), against counts made here
// from the architecture rather than from the model's parameter list.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/roofline.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

TEST(Roofline, FlopsPerTokenCountTheLinearsAndTheCachedEntries) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("none")));
  const auto& c = model->config();
  const double C = c.hidden_size, I = c.intermediate_size, L = c.num_layers, V = c.vocab_size;
  // Per layer: qkv 3C x C, the attention output C x C, the MLP C x I and I x C; the LM head V x C.
  const double weights = L * (3 * C * C + C * C + 2 * C * I) + V * C;
  for (double entries : {0.0, 64.0, 1024.0})
    EXPECT_DOUBLE_EQ(decode_flops_per_token(model, entries), 2 * weights + 4 * L * C * entries) << entries;
}

TEST(Roofline, IsTheLowerOfTheMemoryAndComputeBounds) {
  // 4 streams, 100 bytes of weights, 25 of K/V each, 1000 B/s: 4 * 1000 / 200 = 20 tokens/s from memory.
  const DecodeBounds memory_bound = decode_bounds(4, 100, 25, 1000, 10, 1000);
  EXPECT_DOUBLE_EQ(memory_bound.memory, 20);
  EXPECT_DOUBLE_EQ(memory_bound.compute, 100);
  EXPECT_DOUBLE_EQ(memory_bound.roofline(), 20);
  const DecodeBounds compute_bound = decode_bounds(4, 100, 25, 1e6, 10, 1000);
  EXPECT_DOUBLE_EQ(compute_bound.roofline(), compute_bound.compute);
  EXPECT_LT(compute_bound.compute, compute_bound.memory);
}

TEST(Roofline, WeightBytesLeaveOutTheInputEmbedding) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("none")));
  double all = 0, embedding = 0;
  for (const auto& p : model->named_parameters()) {
    all += p.value().nbytes();
    if (p.key().find("embed_in") != std::string::npos) embedding += p.value().nbytes();
  }
  ASSERT_GT(embedding, 0);
  EXPECT_DOUBLE_EQ(decode_weight_bytes(model), all - embedding);  // fp32, unpacked: as stored
  EXPECT_EQ(format_names(weights_per_format(model)), "fp32");
}

}  // namespace
}  // namespace sinklm
