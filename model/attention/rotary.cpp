#include "model/attention/rotary.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "core/error.h"

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

namespace {

float to_float(float x) { return x; }
float to_float(c10::BFloat16 x) { return static_cast<float>(x); }

// One [T, D] head: row t rotated by cos[t], sin[t] (R dims, rotate-half), the other dims copied.
template <typename In, typename Out>
void rotate_head(const In* x, int64_t row_stride, int64_t T, int64_t D, const float* cos, const float* sin, int64_t R,
                 Out* out) {
  const int64_t half = R / 2;
  for (int64_t t = 0; t < T; ++t, x += row_stride, out += D, cos += R, sin += R) {
    for (int64_t i = 0; i < half; ++i)
      out[i] = static_cast<Out>(to_float(x[i]) * cos[i] - to_float(x[i + half]) * sin[i]);
    for (int64_t i = half; i < R; ++i)
      out[i] = static_cast<Out>(to_float(x[i]) * cos[i] + to_float(x[i - half]) * sin[i]);
    for (int64_t i = R; i < D; ++i) out[i] = static_cast<Out>(to_float(x[i]));
  }
}

template <typename In, typename Out>
void rotate_heads(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, torch::Tensor& out) {
  const int64_t H = x.size(0), T = x.size(1), D = x.size(2), R = cos.size(-1);
  at::parallel_for(0, H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h)
      rotate_head(x.data_ptr<In>() + h * x.stride(0), x.stride(1), T, D, cos.data_ptr<float>(), sin.data_ptr<float>(), R,
                  out.data_ptr<Out>() + h * T * D);
  });
}

}  // namespace

torch::Tensor rotate_in_float32(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                torch::ScalarType out) {
  const bool dtypes = (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16) &&
                      (out == torch::kFloat32 || out == torch::kBFloat16);
  if (!x.device().is_cpu() || !dtypes) return apply_rotary(x.to(torch::kFloat32), cos, sin).to(out).contiguous();
  SINKLM_ASSERT(x.dim() == 3 && cos.dim() == 2 && cos.size(0) == x.size(1) && cos.sizes() == sin.sizes() &&
                    cos.size(1) <= x.size(2) && cos.size(1) % 2 == 0,
                "rotate_in_float32: x [H, T, D], cos and sin [T, R], R even and <= D: ", x.sizes(), " ", cos.sizes());
  const auto rows = x.stride(2) == 1 ? x : x.contiguous();
  const auto c = cos.to(torch::kFloat32).contiguous(), s = sin.to(torch::kFloat32).contiguous();
  auto result = torch::empty(x.sizes(), x.options().dtype(out));  // [H, T, D]
  const bool bf16_in = x.scalar_type() == torch::kBFloat16, bf16_out = out == torch::kBFloat16;
  if (bf16_in && bf16_out) rotate_heads<c10::BFloat16, c10::BFloat16>(rows, c, s, result);
  else if (bf16_in) rotate_heads<c10::BFloat16, float>(rows, c, s, result);
  else if (bf16_out) rotate_heads<float, c10::BFloat16>(rows, c, s, result);
  else rotate_heads<float, float>(rows, c, s, result);
  return result;
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
