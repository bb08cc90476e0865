// The few-row product (model/kernels/few_row_matmul.h) and the Projection layer that uses it, against LibTorch's
// linear: every row count around the 16-row tile and the 64-row limit, column counts off the 16-column panel,
// with and without bias.
#include "model/projection.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "core/system/cpu_features.h"
#include "core/error.h"
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
        expect_close(few_row_matmul(x, packed, b), torch::linear(x, w, b), what + " with bias");
        expect_close(few_row_matmul(x, packed, {}), torch::linear(x, w), what);
      }
}

TEST(FewRowMatmul, TakesStridedRows) {
  if (!cpu_has_avx512f()) GTEST_SKIP() << "no AVX-512F";
  torch::manual_seed(1);
  auto w = torch::randn({48, 32});
  auto x = torch::randn({32, 6}).t();  // [6, 32], not contiguous
  expect_close(few_row_matmul(x, pack_few_row_weight(w), {}), torch::linear(x, w), "transposed rows");
}

// What float32 rounding allows the kernel against the float64 reference of the same rounded operands: a sum
// of K products (exact for int8, in int32; one rounding each for bf16, whose products are exact in float32)
// plus the scale, bias and conversion roundings: (K + 3) ulp-halves (2^-24) of the sum of magnitudes, which
// is the reference applied to |x|, |W| and |b| (rounding commutes with the sign in both formats).
torch::Tensor rounding_bound(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, WeightFormat f) {
  return few_row_matmul_reference(x.abs(), w.abs(), b.abs(), f) * (x.size(1) + 3) * std::ldexp(1.0, -24);
}

// Each element's int8 block scale ([rows, K]: its block's, model/io/weight_format.h).
torch::Tensor per_element_scale(const torch::Tensor& t) {
  return quantize_int8(t).scale.to(torch::kFloat64).repeat_interleave(kInt8Block, 1).narrow(1, 0, t.size(1));
}

// What the format's rounding of the operands allows against the exact float64 product of x and W. bf16 (8
// significant bits): each operand within 2^-8 of itself, so a product within 2^-7 + 2^-16 of its size. int8:
// x within a/2 and W within s/2 elementwise (a and s the element's block scale), so
// |error| <= Σ_k (a_k/2 |W_k| + s_k/2 |x_k| + a_k s_k / 4).
torch::Tensor format_bound(const torch::Tensor& x, const torch::Tensor& w, WeightFormat f) {
  const auto xa = x.abs().to(torch::kFloat64), wa = w.abs().to(torch::kFloat64);
  if (f == WeightFormat::Bf16) return torch::matmul(xa, wa.t()) * (std::ldexp(1.0, -7) + std::ldexp(1.0, -16));
  const auto a = per_element_scale(x), s = per_element_scale(w);  // [M, K], [N, K]
  return torch::matmul(a / 2, wa.t()) + torch::matmul(xa, (s / 2).t()) + torch::matmul(a, s.t()) / 4;
}

void expect_within(const torch::Tensor& got, const torch::Tensor& expected, const torch::Tensor& bound,
                   const std::string& what) {
  const auto excess = ((got.to(torch::kFloat64) - expected).abs() - bound).max().item<double>();
  EXPECT_LE(excess, 0) << what << ": max |error| - bound = " << excess;
}

// The instruction sets this CPU runs the format's kernel in (each is tested: an AVX-512 machine checks the
// AVX2 tiles too), with a note where there are none.
std::vector<InstructionSet> sets_or_note(WeightFormat f) {
  const auto sets = few_row_kernel_sets(f);
  if (sets.empty()) std::cout << "[ note ] this CPU lacks the instructions of the " << weight_format_name(f) << " kernel\n";
  return sets;
}

bool available_or_note(WeightFormat f) { return !sets_or_note(f).empty(); }

TEST(FewRowMatmul, Bf16AndInt8EqualTheirReferenceAndStayWithinTheirFormatsBound) {
  torch::manual_seed(4);
  for (WeightFormat f : {WeightFormat::Bf16, WeightFormat::Int8}) {
    for (InstructionSet set : sets_or_note(f))
      for (int64_t K : {1, 3, 7, 256, 771})
        for (int64_t N : {1, 16, 37, 300})
          for (int64_t M : {1, 2, 3, 5, 16, 17, 64}) {
            auto w = torch::randn({N, K}) * 0.05, b = torch::randn({N}), x = torch::randn({M, K});
            const auto packed = pack_few_row_weight(w, f);
            const auto got = few_row_matmul_in(set, x, packed, b), reference = few_row_matmul_reference(x, w, b, f);
            const std::string what = weight_format_name(f) + " " + instruction_set_name(set) + " M " +
                                     std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K);
            expect_within(got, reference, rounding_bound(x, w, b, f), what + " vs reference");
            const auto exact = torch::linear(x.to(torch::kFloat64), w.to(torch::kFloat64), b.to(torch::kFloat64));
            expect_within(got, exact, format_bound(x, w, f) + rounding_bound(x, w, b, f), what + " vs exact");
          }
  }
}

// One int8 product by hand (one block): a = 4 / 127, xq = round(x / a) = [32, -64 (ties to even), 16, 127];
// the weight's row has largest entry 127, so scale 1 and q = [127, -64 (ties to even), 0, 1]; Σ xq q = 4064 +
// 4096 + 127.
TEST(FewRowMatmul, Int8ByHand) {
  if (!available_or_note(WeightFormat::Int8)) GTEST_SKIP();
  const auto x = torch::tensor({{1.0f, -2.0f, 0.5f, 4.0f}}), w = torch::tensor({{127.0f, -63.5f, 0.0f, 1.0f}});
  for (InstructionSet set : few_row_kernel_sets(WeightFormat::Int8)) {
    const float got = few_row_matmul_in(set, x, pack_few_row_weight(w, WeightFormat::Int8), {}).item<float>();
    EXPECT_NEAR(got, 8287.0 * 4.0 / 127.0, 1e-3) << instruction_set_name(set);
  }
}

// int8 quantises a contiguous row's activations in AVX-512 and a strided one element by element: the same
// quotients, rounding and sums, so the same products to the bit (ragged last blocks, an all-zero block, ties).
TEST(FewRowMatmul, Int8QuantisesContiguousAndStridedRowsAlike) {
  if (!available_or_note(WeightFormat::Int8)) GTEST_SKIP();
  torch::manual_seed(2);
  for (int64_t K : {5, 32, 77, 320}) {
    auto xt = torch::randn({K, 17}) * 3;  // [K, 17]: its transpose has strided rows
    xt.narrow(0, 0, std::min<int64_t>(K, 32)).select(1, 4).zero_();
    xt.select(1, 5).fill_(0.5).narrow(0, 0, 1).fill_(127.0);  // a = 1: quotients of 1/2, ties (to even: 0)
    const auto strided = xt.t(), contiguous = strided.contiguous();
    const auto packed = pack_few_row_weight(torch::randn({40, K}), WeightFormat::Int8);
    for (InstructionSet set : few_row_kernel_sets(WeightFormat::Int8))
      EXPECT_TRUE(torch::equal(few_row_matmul_in(set, strided, packed, {}), few_row_matmul_in(set, contiguous, packed, {})))
          << instruction_set_name(set) << " K " << K;
  }
}

// int8 sums are exact int32 in every set (AMX too) and scaled in the same order, so the sets agree to the bit (bf16's
// differ by rounding: vdpbf16ps adds both products of a pair into one sum and flushes denormals, AVX2 keeps
// the even and the odd k in two sums).
TEST(FewRowMatmul, Int8IsTheSameInEverySet) {
  const auto sets = few_row_kernel_sets(WeightFormat::Int8);
  if (sets.size() < 2) GTEST_SKIP() << "this CPU runs the int8 kernel in at most one instruction set";
  torch::manual_seed(7);
  for (int64_t K : {300, 320})  // AMX takes whole blocks of 32 and whole tiles of 16 rows (the rest: AVX-512)
    for (int64_t M : {1, 3, 16, 17, 40, 48}) {
      auto w = torch::randn({70, K}), b = torch::randn({70}), x = torch::randn({M, K});
      const auto packed = pack_few_row_weight(w, WeightFormat::Int8);
      const auto first = few_row_matmul_in(sets[0], x, packed, b);
      for (size_t i = 1; i < sets.size(); ++i)
        EXPECT_TRUE(torch::equal(first, few_row_matmul_in(sets[i], x, packed, b)))
            << instruction_set_name(sets[i]) << " M " << M << " K " << K;
    }
}

// Every weight and activation at full scale (q and xq = ±127): a pair of products sums to ±32258, within
// int16, in every instruction set (AVX2's vpmaddubsw saturates at 32767, so an unsigned operand of q + 128
// would not fit). The result, K, is exact.
TEST(FewRowMatmul, Int8AtFullScaleDoesNotSaturate) {
  if (!available_or_note(WeightFormat::Int8)) GTEST_SKIP();
  const int64_t K = 256;
  const auto x = torch::tensor({1.0f, -1.0f}).view({2, 1}).expand({2, K}).contiguous();  // [2, K]: xq = ±127
  const auto w = torch::tensor({1.0f, -1.0f, 0.5f}).view({3, 1}).expand({3, K}).contiguous();
  const auto expected = torch::tensor({{1.0f, -1.0f, 1.0f}, {-1.0f, 1.0f, -1.0f}}) * K;
  expected.narrow(1, 2, 1).mul_(0.5);
  for (InstructionSet set : few_row_kernel_sets(WeightFormat::Int8))
    EXPECT_TRUE(torch::allclose(few_row_matmul_in(set, x, pack_few_row_weight(w, WeightFormat::Int8), {}), expected,
                                1e-6, 1e-4))
        << instruction_set_name(set);
}

TEST(WeightFormat, Int8BlocksRoundTripAndStayWithinHalfAScale) {
  torch::manual_seed(5);
  auto w = torch::randn({40, 70});  // blocks of 32, 32 and 6 inputs
  w[3].narrow(0, 32, 32).zero_();   // an all-zero block: scale 1, zeros
  const Int8Weight q = quantize_int8(w);
  ASSERT_EQ(q.scale.sizes(), torch::IntArrayRef({40, 3}));
  EXPECT_EQ(q.scale[3][1].item<float>(), 1.0f);
  EXPECT_EQ(q.q[3].narrow(0, 32, 32).abs().sum().item<int64_t>(), 0);
  // Every other block holds a ±127 (its largest entry), and its scale is that entry / 127.
  EXPECT_EQ(q.q.narrow(1, 0, 32).abs().amax(1).min().item<int64_t>(), 127);
  EXPECT_EQ(q.q.narrow(1, 64, 6).abs().amax(1).min().item<int64_t>(), 127);
  EXPECT_NEAR(q.scale[0][2].item<float>(), w[0].narrow(0, 64, 6).abs().max().item<float>() / 127, 1e-7);
  const auto back = dequantize_int8(q);
  EXPECT_TRUE(((back - w).abs() <= per_element_scale(w).to(torch::kFloat32) / 2 * (1 + 1e-6)).all().item<bool>());
  EXPECT_TRUE(torch::equal(quantize_int8(back).q, q.q));
  EXPECT_THROW(parse_weight_format("int4", "--weights"), UserError);
}

TEST(Projection, Bf16AndInt8FormatsUseTheirKernelAndHoldFewerBytes) {
  torch::manual_seed(6);
  for (WeightFormat f : {WeightFormat::Bf16, WeightFormat::Int8}) {
    Projection layer(96, 80);
    const auto fp32_weight = layer->weight.detach().clone();
    const int64_t fp32_bytes = layer->few_row_bytes();
    layer->set_weight_format(f);
    EXPECT_EQ(layer->weight.scalar_type(), f == WeightFormat::Bf16 ? torch::kBFloat16 : torch::kFloat32);
    if (!available_or_note(f)) continue;
    ASSERT_TRUE(layer->pack_for_few_rows());
    // bf16: 2 bytes per weight; int8: 1 + a float32 scale per 32 (1.125); both + the float32 bias.
    const int64_t expected = (f == WeightFormat::Bf16 ? 80 * 96 * 2 : 80 * 96 + 80 * 3 * 4) + 80 * 4;
    EXPECT_EQ(layer->few_row_bytes(), expected) << weight_format_name(f);
    EXPECT_LT(layer->few_row_bytes(), fp32_bytes / (f == WeightFormat::Bf16 ? 1.9 : 3.4));
    c10::InferenceMode inference;
    for (int64_t T : {1, 16, 64, 65, 200}) {  // up to kFewRows the kernel, beyond it LibTorch's linear
      auto x = torch::randn({T, 96});
      auto exact = torch::linear(x.to(torch::kFloat64), fp32_weight.to(torch::kFloat64), layer->bias.to(torch::kFloat64));
      auto bound = format_bound(x, fp32_weight, f) + rounding_bound(x, fp32_weight, layer->bias, f);
      if (T > ProjectionImpl::kFewRows && f == WeightFormat::Bf16)  // and the product rounded to bf16
        bound = bound + (exact.abs() + bound) * std::ldexp(1.0, -8);
      expect_within(layer(x), exact, bound, weight_format_name(f) + " T " + std::to_string(T));
    }
  }
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
  EXPECT_EQ(packed->few_row_bytes(), (80 * 96 + 80) * 4);  // 80 columns fill 5 panels: no padding
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

// forward_in_product_dtype: a bf16 weight's product of many rows comes back in bf16 with the bias (and the
// GELU) applied inside it, within bf16 rounding of the exact result; packed few-row products and float32
// weights give forward()'s float32 result (and its GELU) exactly.
TEST(Projection, InProductDtypeFusesBiasAndGeluForBf16AndIsForwardOtherwise) {
  torch::manual_seed(9);
  using Activation = ProjectionImpl::Activation;
  Projection fp32(96, 80), bf16(96, 80);
  {
    torch::NoGradGuard no_grad;
    bf16->weight.copy_(fp32->weight);
    bf16->bias.copy_(fp32->bias * 4);  // a bias the product would not hide
  }
  bf16->set_weight_format(WeightFormat::Bf16);
  bf16->pack_for_few_rows();
  c10::InferenceMode inference;
  for (int64_t T : {16, 200}) {
    const auto x = torch::randn({T, 96});
    const std::string label = "T " + std::to_string(T);
    EXPECT_TRUE(torch::equal(fp32->forward_in_product_dtype(x), fp32(x))) << label;
    EXPECT_TRUE(torch::equal(fp32->forward_in_product_dtype(x, Activation::Gelu), torch::gelu(fp32(x)))) << label;
    const auto y = bf16->forward_in_product_dtype(x), g = bf16->forward_in_product_dtype(x, Activation::Gelu);
    if (y.scalar_type() == torch::kFloat32) {  // packed, or no native bf16 product here: forward() itself
      EXPECT_TRUE(torch::equal(y, bf16(x))) << label;
      EXPECT_TRUE(torch::equal(g, torch::gelu(bf16(x)))) << label;
      continue;
    }
    EXPECT_GT(T, ProjectionImpl::kFewRows);
    const auto exact = torch::linear(x.to(torch::kBFloat16).to(torch::kFloat64), bf16->weight.to(torch::kFloat64),
                                     bf16->bias.to(torch::kFloat64));  // [T, 80]
    // bf16 rounding of the result and of the bias (2^-8 relative each), float32 accumulation far below.
    const auto bound = (exact.abs() + bf16->bias.to(torch::kFloat64).abs()) * std::ldexp(1.0, -8) + 1e-4;
    expect_within(y.to(torch::kFloat32), exact, bound, label);
    expect_within(g.to(torch::kFloat32), torch::gelu(exact), bound, label + " gelu");
  }
}

}  // namespace
}  // namespace sinklm
