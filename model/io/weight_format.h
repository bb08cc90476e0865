// How a projection's weight is held for inference: the element type its products read. fp32 is the trained
// form; bf16 halves the bytes a decode step reads (products accumulate in float32); int8 quarters them
// (symmetric, one scale per output row, as below). LayerNorm, embeddings lookups, softmax, the sink column and
// residual sums stay float32 in every format.
#pragma once
#include <torch/types.h>

#include <string>

namespace sinklm {

enum class WeightFormat { Fp32, Bf16, Int8 };

std::string weight_format_name(WeightFormat format);  // "fp32" | "bf16" | "int8"
// "fp32" | "bf16" | "int8", else a UserError naming `what` (a flag or a file).
WeightFormat parse_weight_format(const std::string& name, const std::string& what);

// Symmetric int8 in blocks of 32 consecutive inputs of one output row, as llama.cpp's q8_0: for row n and
// block b (inputs 32 b .. 32 b + 31), scale[n, b] = max |W[n, k]| / 127 over the block (1 for an all-zero
// block), q[n, k] = round-half-even(W[n, k] / scale[n, b]) in [-127, 127], so W ≈ q * scale within scale / 2.
// Quantizing q * scale again gives the same q: each block's largest entry is ±127 * scale.
constexpr int64_t kInt8Block = 32;

struct Int8Weight {
  torch::Tensor q;      // [N, K] int8
  torch::Tensor scale;  // [N, ceil(K / 32)] float32
};
Int8Weight quantize_int8(const torch::Tensor& weight);  // weight [N, K], any float dtype
torch::Tensor dequantize_int8(const Int8Weight& w);     // [N, K] float32 = q * scale

// The dtype bf16 operands are multiplied in on `device`: bf16 where LibTorch multiplies bf16 natively (CUDA;
// a CPU with AVX512-BF16, where oneDNN runs it), float32 elsewhere, where LibTorch's bf16 matmul is a generic
// loop several times slower than widening the operands first. The operands are the same either way (bf16
// values, exact in float32) and the products accumulate in float32; only the output's rounding differs.
torch::ScalarType bf16_product_dtype(const torch::Device& device);

}  // namespace sinklm
