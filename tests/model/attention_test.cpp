// The fast attention path (scaled_dot_product_attention) against the plain reference, for every sink
// variant, in training shape (Tq == Tk) and KV-cache shape (Tq < Tk), forward and backward.
#include "model/attention/attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace sinklm {
namespace {

struct Case {
  const char* name;
  int64_t tq, tk;
  int sink;  // 0 none, 1 zero logit (softmax1), 2 learned logit
};

class AttentionEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionEquivalence, FastMatchesReferenceForwardAndBackward) {
  const Case c = GetParam();
  torch::manual_seed(7);
  const int64_t B = 2, H = 3, D = 16;
  auto make = [](std::vector<int64_t> shape) { return torch::randn(shape, torch::kFloat64).requires_grad_(true); };
  auto q = make({B, H, c.tq, D}), k = make({B, H, c.tk, D}), v = make({B, H, c.tk, D});
  torch::Tensor logit;
  if (c.sink == 1) logit = torch::zeros({H}, torch::kFloat64);
  if (c.sink == 2) logit = (torch::randn({H}, torch::kFloat64) * 2).requires_grad_(true);

  auto run = [&](AttentionImpl impl) {
    auto out = causal_attention(q, k, v, SinkColumn{logit}, impl);
    torch::manual_seed(11);
    auto upstream = torch::randn(out.sizes(), torch::kFloat64);
    auto grads = torch::autograd::grad({(out * upstream).sum()}, logit.defined() && logit.requires_grad()
                                                                     ? std::vector<torch::Tensor>{q, k, v, logit}
                                                                     : std::vector<torch::Tensor>{q, k, v});
    return std::make_pair(out.detach(), grads);
  };
  auto [fast, fast_grads] = run(AttentionImpl::Fast);
  auto [ref, ref_grads] = run(AttentionImpl::Reference);
  // The reference computes in float32, so compare at float32 precision.
  EXPECT_TRUE(torch::allclose(fast, ref, 1e-5, 1e-5)) << (fast - ref).abs().max();
  ASSERT_EQ(fast_grads.size(), ref_grads.size());
  for (size_t i = 0; i < fast_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(fast_grads[i], ref_grads[i], 1e-4, 1e-5)) << "grad " << i << ": "
                                                                          << (fast_grads[i] - ref_grads[i]).abs().max();
}

INSTANTIATE_TEST_SUITE_P(AllVariants, AttentionEquivalence,
                         ::testing::Values(Case{"vanilla_square", 9, 9, 0}, Case{"softmax1_square", 9, 9, 1},
                                           Case{"logit_square", 9, 9, 2}, Case{"vanilla_cache", 3, 11, 0},
                                           Case{"softmax1_cache", 3, 11, 1}, Case{"logit_cache", 1, 11, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Attention, ProbabilitiesAreCausal) {
  torch::manual_seed(3);
  auto q = torch::randn({1, 2, 4, 8}), k = torch::randn({1, 2, 6, 8});
  auto p = causal_attention_probabilities(q, k, {});
  // query i sits at key index 2 + i: keys after it get nothing, rows sum to one.
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p.index({0, 0, i}).narrow(0, 3 + i, 3 - i).abs().sum().item<float>(), 0.0f);
    EXPECT_NEAR(p.index({0, 1, i}).sum().item<float>(), 1.0f, 1e-6);
  }
}

}  // namespace
}  // namespace sinklm
