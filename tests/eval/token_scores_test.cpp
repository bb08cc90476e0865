// token_scores (model/kernels/token_scores.h) against -log_softmax(...).gather(...) and argmax: the AVX-512 kernel on
// float32 rows (the streaming path: a vocabulary not a multiple of 16, extreme and tied logits, the maximum
// in the ragged last vector), and the LibTorch fallback for other dtypes and strided rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "model/kernels/token_scores.h"

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

TEST(TokenScores, EqualLogSoftmaxGatherAndArgmaxOnFloat32Rows) {
  torch::manual_seed(3);
  const int64_t T = 37, V = 50277;  // a tokenizer's vocabulary: a ragged last vector
  auto logits = torch::randn({T, V}) * 4;
  logits[1].fill_(2.5);        // all tied: log V
  logits[2][7] = 80;           // one logit far above the rest: NLL ~0 at 7, ~80 elsewhere
  logits[3].mul_(1e-6);        // almost flat
  logits[4][V - 1] = 50;       // the maximum in the last, ragged vector
  logits[5][V - 3] = 60;       // tied maxima: the first one is ranked first
  logits[5][40] = 60;
  auto targets = draw_targets(T, V);
  targets[2] = 7;
  const auto [nll, top1] = token_scores(logits, targets);
  ASSERT_EQ(nll.sizes(), torch::IntArrayRef({T}));
  EXPECT_TRUE(torch::equal(top1, logits.argmax(1)));
  EXPECT_EQ(top1[1].item<int64_t>(), 0);
  EXPECT_EQ(top1[4].item<int64_t>(), V - 1);
  EXPECT_EQ(top1[5].item<int64_t>(), 40);
  EXPECT_TRUE(torch::allclose(nll, reference_nll(logits, targets), 1e-5, 1e-5))
      << (nll - reference_nll(logits, targets)).abs().max().item<float>();
  EXPECT_NEAR(nll[1].item<float>(), std::log(static_cast<double>(V)), 1e-4);
  EXPECT_LT(nll[2].item<float>(), 1e-5);
}

TEST(TokenScores, FallbackTakesOtherDtypesAndStridedRows) {
  torch::manual_seed(4);
  const int64_t T = 9, V = 301;
  auto wide = torch::randn({T, 2 * V});
  auto strided = wide.narrow(1, 0, V);  // rows not contiguous
  auto targets = draw_targets(T, V);
  for (const auto& logits : {strided, strided.to(torch::kBFloat16)}) {
    const auto [nll, top1] = token_scores(logits, targets);
    EXPECT_TRUE(torch::allclose(nll, reference_nll(logits, targets), 1e-5, 1e-5));
    EXPECT_TRUE(torch::equal(top1, logits.argmax(1)));
  }
}

// Greedy decoding's pick, row by row: [V] and [1, V] rows, strided and bf16 rows (LibTorch's argmax), against
// torch.argmax on the rows above (ties, the ragged last vector, extremes).
TEST(TokenScores, TopTokenIsArgmaxOfEveryRow) {
  torch::manual_seed(5);
  const int64_t V = 50277;
  auto logits = torch::randn({6, V}) * 4;
  logits[1].fill_(-2.5);
  logits[2][V - 1] = 50;
  logits[3][V - 3] = 60;
  logits[3][17] = 60;
  logits[4][0] = 1e30;
  logits[5].fill_(-std::numeric_limits<float>::infinity());
  logits[5][V - 2] = -1e30;
  for (int64_t i = 0; i < logits.size(0); ++i) {
    const int64_t expected = logits[i].argmax().item<int64_t>();
    EXPECT_EQ(top_token(logits[i]), expected) << "row " << i;
    EXPECT_EQ(top_token(logits[i].unsqueeze(0)), expected) << "row " << i << " as [1, V]";
    EXPECT_EQ(top_token(logits[i].to(torch::kBFloat16)), logits[i].to(torch::kBFloat16).argmax().item<int64_t>());
  }
  EXPECT_EQ(top_token(logits.select(1, 9)), logits.select(1, 9).argmax().item<int64_t>()) << "a strided column";
  EXPECT_EQ(top_token(logits[3]), 17);
  EXPECT_EQ(top_token(logits[2]), V - 1);
}

}  // namespace
}  // namespace sinklm
