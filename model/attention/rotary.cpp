#include "model/attention/rotary.h"

#include <torch/torch.h>

namespace sinklm {

RotaryEmbedding::RotaryEmbedding(int64_t rotary_dims, double base) : rotary_dims_(rotary_dims) {
  auto exponents = torch::arange(0, rotary_dims, 2, torch::kFloat64) / static_cast<double>(rotary_dims);
  inv_freq_ = 1.0 / torch::pow(base, exponents);
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::cos_sin(const torch::Tensor& positions) const {
  auto angles = positions.to(torch::kFloat64).unsqueeze(-1) * inv_freq_.to(positions.device());  // [..., T, R/2]
  angles = torch::cat({angles, angles}, -1);                                                      // [..., T, R]
  return {angles.cos().to(torch::kFloat32), angles.sin().to(torch::kFloat32)};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t rotary_dims = cos.size(-1), half = rotary_dims / 2;
  if (rotary_dims == 0) return x;
  auto c = cos.dim() == 3 ? cos.unsqueeze(1) : cos;  // [B, 1, T, R] or [T, R], broadcast over heads
  auto s = sin.dim() == 3 ? sin.unsqueeze(1) : sin;
  c = c.to(x.scalar_type());
  s = s.to(x.scalar_type());
  auto rot = x.narrow(-1, 0, rotary_dims);
  auto rotated_half = torch::cat({-rot.narrow(-1, half, half), rot.narrow(-1, 0, half)}, -1);
  auto out = rot * c + rotated_half * s;
  if (rotary_dims == x.size(-1)) return out;
  return torch::cat({out, x.narrow(-1, rotary_dims, x.size(-1) - rotary_dims)}, -1);
}

}  // namespace sinklm

torch::Tensor rotary_matrix(const torch::Tensor& cos, const torch::Tensor& sin, int64_t head_dim) {
  const int64_t rotary_dims = cos.size(-1), half = rotary_dims / 2;
  auto shape = cos.sizes().vec();
  shape.back() = head_dim;
  auto diagonal = torch::ones(shape, cos.options());  // [..., D]: cos on the rotary dims, 1 on the others
  diagonal.narrow(-1, 0, rotary_dims).copy_(cos);
  shape.push_back(head_dim);
  auto m = torch::zeros(shape, cos.options());  // [..., D, D], out[i] = sum_j x[j] m[j, i]
  m.diagonal(0, -2, -1).copy_(diagonal);
  // rotate-half: out[i] -= x[i + half] sin[i] (i < half), out[i] += x[i - half] sin[i] (half <= i < R).
  m.narrow(-2, half, half).narrow(-1, 0, half).diagonal(0, -2, -1).copy_(-sin.narrow(-1, 0, half));
  m.narrow(-2, 0, half).narrow(-1, half, half).diagonal(0, -2, -1).copy_(sin.narrow(-1, half, half));
  return m;
}
