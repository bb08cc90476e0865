// Rotary position embedding: the matrix form decoding uses, and the one-pass float32 form a prompt chunk uses,
// equal apply_rotary.
#include "model/attention/rotary.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace sinklm {
namespace {

TEST(Rotary, MatrixFormEqualsApplyRotaryForPartialAndFullRotation) {
  torch::manual_seed(0);
  const int64_t D = 16;
  for (int64_t rotary_dims : {0, 4, 16}) {
    RotaryEmbedding rotary(rotary_dims, 100);
    auto positions = torch::tensor({0, 3, 1000000}, torch::kInt64);  // [P]
    auto [cos, sin] = rotary.cos_sin(positions);                       // [P, R]
    auto x = torch::randn({positions.size(0), 3, 1, D});               // [P, H, 1, D]: one position per row
    auto expected = apply_rotary(x, cos.unsqueeze(1), sin.unsqueeze(1));
    auto got = torch::matmul(x, rotary_matrix(cos, sin, D).unsqueeze(1));  // [P, 1, D, D] over heads
    EXPECT_TRUE(torch::allclose(got, expected, 1e-6, 1e-6)) << "rotary_dims " << rotary_dims;
  }
}

// rotate_in_float32 against apply_rotary in float32 then converted, for each input and output dtype, on a
// strided view (q of a packed qkv) and on a contiguous tensor.
TEST(Rotary, OnePassFloat32FormEqualsApplyRotaryForEveryDtype) {
  torch::manual_seed(1);
  const int64_t H = 3, T = 7, D = 16;
  for (int64_t rotary_dims : {0, 4, 16}) {
    RotaryEmbedding rotary(rotary_dims, 100);
    auto [cos, sin] = rotary.cos_sin(torch::arange(5000, 5000 + T, torch::kInt64));  // [T, R]
    for (auto in : {torch::kFloat32, torch::kBFloat16})
      for (auto out : {torch::kFloat32, torch::kBFloat16})
        for (bool strided : {false, true}) {
          auto packed = (torch::randn({T, H, 3 * D}) * 3).to(in);  // [T, H, 3D]
          auto x = strided ? packed.permute({1, 0, 2}).narrow(-1, D, D) : packed.narrow(-1, 0, D).permute({1, 0, 2}).contiguous();
          auto expected = apply_rotary(x.to(torch::kFloat32), cos, sin).to(out);
          auto got = rotate_in_float32(x, cos, sin, out);
          const double tolerance = out == torch::kBFloat16 ? 1.0 / 128 : 1e-6;
          EXPECT_TRUE(got.is_contiguous() && got.scalar_type() == out);
          EXPECT_TRUE(torch::allclose(got.to(torch::kFloat32), expected.to(torch::kFloat32), tolerance, 1e-6))
              << "rotary_dims " << rotary_dims << " in " << in << " out " << out << " strided " << strided;
        }
  }
}

}  // namespace
}  // namespace sinklm
