// CUDA checks (label gpu): skipped cleanly where no GPU is present.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/autocast_guard.h"
#include "model/gpt_neox.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"

// Every sink mode of the table (model/sink.h), kv and gated among them: logits and every parameter's gradient
// on CUDA equal the CPU's, from the same weights (fp32; TF32 is off in LibTorch's matmuls by default).
TEST(Gpu, ModelOnCudaMatchesCpuForEveryVariant) {
  REQUIRE_CUDA();
  for (const std::string& mode : testing_support::sink_mode_names()) {
    GPTNeoXForCausalLM cpu_model(ModelConfig::from(testing_support::tiny_config(mode)));
    testing_support::randomize_sink_parameters(cpu_model);
    GPTNeoXForCausalLM cuda_model(ModelConfig::from(testing_support::tiny_config(mode)));
    {
      torch::NoGradGuard no_grad;
      const auto from = cpu_model->named_parameters();
      for (auto& p : cuda_model->named_parameters()) p.value().copy_(from[p.key()]);
    }
    cuda_model->to(torch::kCUDA);
    auto ids = testing_support::random_ids(2, 33, 60);
    auto cpu = cpu_model->forward(ids);                        // [B, T, V]
    auto gpu = cuda_model->forward(ids.to(torch::kCUDA));
    EXPECT_TRUE(torch::allclose(cpu, gpu.cpu(), 1e-3, 1e-3)) << mode << " logits " << (cpu - gpu.cpu()).abs().max();
    cpu.pow(2).mean().backward();
    gpu.pow(2).mean().backward();
    const auto cuda_parameters = cuda_model->named_parameters();
    for (const auto& p : cpu_model->named_parameters()) {
      const torch::Tensor want = p.value().grad(), got = cuda_parameters[p.key()].grad();
      ASSERT_TRUE(want.defined() && got.defined()) << mode << " " << p.key() << ": no gradient";
      EXPECT_TRUE(torch::allclose(want, got.cpu(), 1e-3, 1e-4)) << mode << " " << p.key() << " gradient "
                                                                  << (want - got.cpu()).abs().max();
    }
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
