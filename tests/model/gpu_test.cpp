// CUDA checks (label gpu): skipped cleanly where no GPU is present.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention.h"
#include "model/autocast_guard.h"
#include "model/gpt_neox.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"

TEST(Gpu, ModelOnCudaMatchesCpuForEveryVariant) {
  REQUIRE_CUDA();
  for (const std::string& mode : testing_support::sink_mode_names()) {
    GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config(mode)));
    testing_support::randomize_sink_parameters(model);
    torch::NoGradGuard no_grad;
    auto ids = testing_support::random_ids(2, 33, 60);
    auto cpu = model->forward(ids);
    model->to(torch::kCUDA);
    auto gpu = model->forward(ids.to(torch::kCUDA)).cpu();
    EXPECT_TRUE(torch::allclose(cpu, gpu, 1e-3, 1e-3)) << mode << " " << (cpu - gpu).abs().max();
  }
}

TEST(Gpu, Bf16AutocastStaysCloseToFp32) {
  REQUIRE_CUDA();
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("logit")));
  model->to(torch::kCUDA);
  auto ids = testing_support::random_ids(2, 64, 60).to(torch::kCUDA);
  torch::NoGradGuard no_grad;
  auto fp32 = model->forward(ids);
  torch::Tensor bf16;
  {
    AutocastGuard autocast(torch::kCUDA);
    bf16 = model->forward(ids).to(torch::kFloat32);
  }
  EXPECT_LT((bf16 - fp32).abs().max().item<float>(), 0.1f);
}

TEST(Gpu, FastSinkAttentionMatchesReferenceOnCuda) {
  REQUIRE_CUDA();
  torch::manual_seed(2);
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto q = torch::randn({2, 4, 128, 64}, opts), k = torch::randn({2, 4, 128, 64}, opts), v = torch::randn({2, 4, 128, 64}, opts);
  auto logit = torch::randn({4}, opts);
  auto fast = causal_attention(q, k, v, SinkColumn{logit}, AttentionImpl::Fast);
  auto ref = causal_attention(q, k, v, SinkColumn{logit}, AttentionImpl::Reference);
  EXPECT_TRUE(torch::allclose(fast, ref, 2e-3, 2e-3)) << (fast - ref).abs().max();
}

}  // namespace
}  // namespace sinklm
