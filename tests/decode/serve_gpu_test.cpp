// Serving on CUDA (label gpu; skipped without a GPU): batched decode attention over pooled caches on the GPU
// gives the logits of per-stream decoding on the CPU, for every sink mode.
#include <gtest/gtest.h>

#include "decode/cached_decoder.h"
#include "tests/decode/decode_test_support.h"

namespace sinklm {
namespace {

using namespace testing_support;

TEST(ServeGpu, BatchedCudaDecodeEqualsPerStreamCpuDecode) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  for (const std::string& mode : testing_support::sink_mode_names()) {
    auto cpu_model = random_tiny_model(mode), cuda_model = random_tiny_model(mode);
    cuda_model->to(torch::kCUDA);
    const auto& c = cpu_model->config();
    CachedDecoder gpu(cuda_model), cpu(cpu_model);
    cpu.set_batched_decode(false);
    auto policy = policy_of("sink_window", 16, -1, c);
    std::vector<std::unique_ptr<DecoderStream>> on_gpu, on_cpu;
    for (int64_t i = 0; i < 3; ++i) {  // staggered lengths; 30 decode steps run every stream past its window
      on_gpu.push_back(std::make_unique<DecoderStream>(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCUDA));
      on_cpu.push_back(std::make_unique<DecoderStream>(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU));
      const auto start = with_sink_prefix(c, random_token_ids(3 * i + 2, c.tokenizer_vocab_size, 50 + i));
      stream_logits(gpu, *on_gpu[i], start, 4);
      stream_logits(cpu, *on_cpu[i], start, 4);
    }
    const auto ids = random_token_ids(90, c.tokenizer_vocab_size, 9);
    double worst = 0;
    for (int64_t s = 0; s < 30; ++s) {
      std::vector<StreamChunk> a, b;
      for (int64_t i = 0; i < 3; ++i) {
        a.push_back({on_gpu[i].get(), {ids[3 * s + i]}});
        b.push_back({on_cpu[i].get(), {ids[3 * s + i]}});
      }
      auto la = gpu.step(a, LogitsWanted::All), lb = cpu.step(b, LogitsWanted::All);
      for (int64_t i = 0; i < 3; ++i) worst = std::max(worst, relative_error(la[i].cpu(), lb[i]));
    }
    EXPECT_LE(worst, 1e-4) << mode;
    EXPECT_GT(gpu.batched_decode_tokens(), 0) << mode << ": the GPU decoder never batched";
  }
}

}  // namespace
}  // namespace sinklm
