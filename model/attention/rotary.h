// Rotary position embedding, GPT-NeoX convention: "rotate half" applied to the first `rotary_dims` of
// each head; the remaining dims pass through unchanged.
#pragma once
#include <torch/types.h>

#include <utility>

namespace sinklm {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t rotary_dims, double base);

  // positions: [T] or [B, T] int64 -> (cos, sin), each [T, R] or [B, T, R] float32 (R = rotary_dims).
  // Angles are formed in float64 so a position of 10^7 is as exact as a position of 10^3.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& positions) const;

  int64_t rotary_dims() const { return rotary_dims_; }

 private:
  int64_t rotary_dims_;
  torch::Tensor inv_freq_;  // [R/2] float64
};

// x: [B, H, T, D]; returns x with x[..., :R] rotated by the angles in cos/sin (from cos_sin(); R = cos.size(-1)).
// The arithmetic runs in x's dtype (cos and sin are cast to it), as Hugging Face's GPT-NeoX does under autocast.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// apply_rotary in one pass over x [H, T, D] (float32 or bf16, any strides; cos, sin [T, R] float32 on the CPU),
// the arithmetic in float32 whatever x's dtype, the result [H, T, D] contiguous in `out` (float32 or bf16):
// equal to apply_rotary(x.to(float32), cos, sin).to(out). A prompt chunk's queries and keys, where apply_rotary
// and the conversions around it were a dozen passes. Other devices take that composition.
torch::Tensor rotate_in_float32(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                torch::ScalarType out);

}  // namespace sinklm

// The same rotation as a matrix: x[..., :] @ rotary_matrix(cos, sin, D) == apply_rotary(x, cos, sin) for x of
// head size D. cos, sin: [..., R] (one position each) -> [..., D, D]. Decoding applies it as one product
// (a few rows per step), where apply_rotary is a dozen small ops.
torch::Tensor rotary_matrix(const torch::Tensor& cos, const torch::Tensor& sin, int64_t head_dim);
