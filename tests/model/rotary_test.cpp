// Rotary position embedding: the matrix form decoding uses equals apply_rotary.
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

}  // namespace
}  // namespace sinklm
