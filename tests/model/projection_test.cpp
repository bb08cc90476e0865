// The few-row product (model/kernels/few_row_matmul.h) and the Projection layer that uses it, against LibTorch's
// linear: every row count around the 16-row tile and the 64-row limit, column counts off the 16-column panel,
// with and without bias.
#include "model/projection.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/cpu_features.h"
#include "model/kernels/few_row_matmul.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

// float32 sums of K products in another order than BLAS: a few ulp per term.
void expect_close(const torch::Tensor& got, const torch::Tensor& expected, const std::string& what) {
  EXPECT_LE(testing_support::scaled_max_error(got, expected), 1e-5) << what;
}

TEST(FewRowMatmul, EqualsLinearForEveryRowCountAndRaggedColumns) {
  if (!cpu_has_avx512f()) GTEST_SKIP() << "this CPU has no AVX-512F: Projection uses LibTorch's linear";
  torch::manual_seed(0);
  for (int64_t K : {1, 7, 256})
    for (int64_t N : {1, 16, 37, 300})
      for (int64_t M : {1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 33, 64}) {
        auto w = torch::randn({N, K}), b = torch::randn({N}), x = torch::randn({M, K});
        const auto packed = pack_few_row_weight(w);
        const std::string what = "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K);
        expect_close(few_row_matmul(x, packed, b, N), torch::linear(x, w, b), what + " with bias");
        expect_close(few_row_matmul(x, packed, {}, N), torch::linear(x, w), what);
      }
}

TEST(FewRowMatmul, TakesStridedRows) {
  if (!cpu_has_avx512f()) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(1);
  auto w = torch::randn({48, 32});
  auto x = torch::randn({32, 6}).t();  // [6, 32], not contiguous
  expect_close(few_row_matmul(x, pack_few_row_weight(w), {}, 48), torch::linear(x, w), "transposed rows");
}

TEST(Projection, PackedEqualsUnpackedAndLargeOrGradientInputsTakeLinear) {
  torch::manual_seed(2);
  Projection packed(96, 80), plain(96, 80);
  {
    torch::NoGradGuard no_grad;
    plain->weight.copy_(packed->weight);
    plain->bias.copy_(packed->bias);
  }
  EXPECT_EQ(packed->pack_for_few_rows(), cpu_has_avx512f());
  for (int64_t T : {1, 5, 16, 64, 65, 200}) {  // rows: up to kFewRows packed, beyond it LibTorch
    auto x = torch::randn({1, T, 96});
    torch::Tensor got, expected;
    {
      c10::InferenceMode inference;
      got = packed(x);
      expected = plain(x);
    }
    expect_close(got, expected, "T " + std::to_string(T));
  }
  // With a gradient wanted the packed copy is bypassed: backward reaches the weight.
  auto x = torch::randn({2, 3, 96});
  packed(x).sum().backward();
  ASSERT_TRUE(packed->weight.grad().defined());
  EXPECT_GT(packed->weight.grad().abs().sum().item<double>(), 0);
}

TEST(Projection, AChangedWeightRetiresThePackedCopy) {
  torch::manual_seed(3);
  Projection projection(32, 32);
  projection->pack_for_few_rows();
  auto x = torch::randn({2, 32});
  {
    torch::NoGradGuard no_grad;
    projection->weight.mul_(2);  // in place, as an optimizer step or a checkpoint load would
  }
  c10::InferenceMode inference;
  expect_close(projection(x), torch::linear(x, projection->weight, projection->bias), "after mul_");
  {
    torch::NoGradGuard no_grad;
    projection->weight.set_data(torch::randn({32, 32}));  // new storage
  }
  expect_close(projection(x), torch::linear(x, projection->weight, projection->bias), "after set_data");
}

TEST(Projection, PackingDoesNotApplyToDoubleWeights) {
  Projection projection(8, 8);
  projection->to(torch::kFloat64);
  EXPECT_FALSE(projection->pack_for_few_rows());
  c10::InferenceMode inference;
  auto x = torch::randn({1, 8}, torch::kFloat64);
  expect_close(projection(x), torch::linear(x, projection->weight, projection->bias), "float64");
}

}  // namespace
}  // namespace sinklm
