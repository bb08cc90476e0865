// Activation checkpointing recomputes each layer in backward: the loss and every gradient must equal the
// plain path's, for every sink mode, and the checkpointed graph must keep less.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/activation_checkpoint.h"
#include "model/gpt_neox.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

struct LossAndGrads {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
};

LossAndGrads loss_and_grads(const std::string& mode, const std::string& parallel, bool checkpointing) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config(mode, {"model.parallel_residual=" + parallel})));
  testing_support::randomize_sink_parameters(model);
  model->set_activation_checkpointing(checkpointing);
  auto ids = testing_support::random_ids(3, 40, 60);
  auto logits = model->forward(ids.narrow(1, 0, 39));  // [B, T, V]
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), ids.narrow(1, 1, 39).reshape(-1));
  loss.backward();
  LossAndGrads out{loss.detach(), {}};
  for (const auto& p : model->parameters()) out.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return out;
}

TEST(ActivationCheckpointing, LossAndEveryGradientEqualThePlainPath) {
  for (const std::string parallel : {"true", "false"}) {
    for (const std::string& mode : testing_support::sink_mode_names()) {
      const std::string what = mode + ", parallel_residual " + parallel;
      auto plain = loss_and_grads(mode, parallel, false), recomputed = loss_and_grads(mode, parallel, true);
      EXPECT_TRUE(torch::equal(plain.loss, recomputed.loss)) << what;
      ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
      for (size_t i = 0; i < plain.grads.size(); ++i) {
        ASSERT_EQ(plain.grads[i].defined(), recomputed.grads[i].defined()) << what << ", parameter " << i;
        if (plain.grads[i].defined())
          EXPECT_TRUE(torch::allclose(plain.grads[i], recomputed.grads[i], 1e-6, 1e-7))
              << what << ", parameter " << i << ": " << (plain.grads[i] - recomputed.grads[i]).abs().max();
      }
    }
  }
}

TEST(ActivationCheckpointing, BlockRunsAgainInBackwardAndNotWithoutGrad) {
  int calls = 0;
  auto w = torch::randn({4, 4}, torch::requires_grad());
  auto x = torch::randn({2, 4}, torch::requires_grad());
  Block block = [&](const torch::Tensor& h) {
    ++calls;
    return torch::tanh(h.matmul(w));
  };
  auto y = recompute_in_backward(block, x);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_EQ(calls, 2);  // recomputed once in backward
  auto expected_x = x.detach().requires_grad_(), expected_w = w.detach().requires_grad_();
  torch::tanh(expected_x.matmul(expected_w)).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), expected_x.grad()));
  EXPECT_TRUE(torch::allclose(w.grad(), expected_w.grad()));
  {
    torch::NoGradGuard no_grad;
    recompute_in_backward(block, x);
  }
  EXPECT_EQ(calls, 3);  // outside grad mode: one plain call, no node
}

}  // namespace
}  // namespace sinklm
