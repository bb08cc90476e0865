// token_nll (model/kernels/token_nll.h) against -log_softmax(...).gather(...): the AVX-512 kernel on float32 rows (the
// streaming path: a vocabulary not a multiple of 16, extreme and tied logits), and the LibTorch fallback
// for other dtypes and strided rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/token_nll.h"

namespace sinklm {
namespace {

torch::Tensor reference_nll(const torch::Tensor& logits, const std::vector<int64_t>& targets) {
  auto index = torch::tensor(targets, torch::kInt64).unsqueeze(1);
  return (-torch::log_softmax(logits.to(torch::kFloat32), -1).gather(1, index)).squeeze(1);
}

std::vector<int64_t> draw_targets(int64_t T, int64_t V) {
  auto t = torch::randint(V, {T}, torch::kInt64);
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + T};
}

TEST(TokenNll, EqualsLogSoftmaxGatherOnFloat32Rows) {
  torch::manual_seed(3);
  const int64_t T = 37, V = 50277;  // a tokenizer's vocabulary: a ragged last vector
  auto logits = torch::randn({T, V}) * 4;
  logits[1].fill_(2.5);        // all tied: log V
  logits[2][7] = 80;           // one logit far above the rest: NLL ~0 at 7, ~80 elsewhere
  logits[3].mul_(1e-6);        // almost flat
  auto targets = draw_targets(T, V);
  targets[2] = 7;
  auto nll = token_nll(logits, targets);
  ASSERT_EQ(nll.sizes(), torch::IntArrayRef({T}));
  EXPECT_TRUE(torch::allclose(nll, reference_nll(logits, targets), 1e-5, 1e-5))
      << (nll - reference_nll(logits, targets)).abs().max().item<float>();
  EXPECT_NEAR(nll[1].item<float>(), std::log(static_cast<double>(V)), 1e-4);
  EXPECT_LT(nll[2].item<float>(), 1e-5);
}

TEST(TokenNll, FallbackTakesOtherDtypesAndStridedRows) {
  torch::manual_seed(4);
  const int64_t T = 9, V = 301;
  auto wide = torch::randn({T, 2 * V});
  auto strided = wide.narrow(1, 0, V);  // rows not contiguous
  auto targets = draw_targets(T, V);
  EXPECT_TRUE(torch::allclose(token_nll(strided, targets), reference_nll(strided, targets), 1e-5, 1e-5));
  auto half = strided.to(torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(token_nll(half, targets), reference_nll(half, targets), 1e-5, 1e-5));
}

}  // namespace
}  // namespace sinklm
