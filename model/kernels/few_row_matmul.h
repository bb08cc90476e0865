// y = x · Wᵀ + b for products with few rows on a CPU: a decode step multiplies every weight matrix by one
// row per stream (1 to a few dozen rows). BLAS sgemm repacks the whole weight on every such call (measured
// here: MKL spent more time copying the weight into its panel layout than multiplying), and its
// matrix-vector path streams a row-major weight at a fraction of the memory bandwidth. This kernel packs
// the weight once, into panels of 16 output columns, G consecutive k of one column side by side:
//
//   packed [ceil(N / 16), ceil(K / G), 16, G]: packed[p, k / G, j, k % G] = W[16 p + j, k], 0 past N and K
//
//   fp32  G = 1  float32                 y = Σ_k x[k] W[n, k] (+ b), float32 multiply-adds (AVX-512F)
//   bf16  G = 2  bfloat16                x rounded to bf16, pairs multiplied and summed into float32
//                                        (AVX512-BF16 vdpbf16ps), + b
//   int8  G = 4  uint8 = q[n, k] + 128    blocks of 32 k as llama.cpp's q8_0 (model/weight_format.h): the
//                (q, scale[n, b]:        weight by quantize_int8, x the same way per row at each step
//                model/weight_format.h)  (xq, a[m, b]); quads of u8 x s8 summed into int32 (AVX512-VNNI
//                                        vpdpbusd), each block's sum less its excess 128 Σ xq (the row's,
//                                        since the weights are stored + 128) scaled by a[m, b] scale[n, b]
//                                        into float32, + b
//
// One 64-byte weight load feeds one multiply-add per row, so each weight byte is read once per step however
// many streams decode; rows come in tiles of up to 16 (8 for int8, whose sums take two registers; each tile
// re-reads the panel from cache). Sums run over
// k in order: fp32 results differ from BLAS by rounding only; bf16 and int8 results are exact up to float32
// rounding of the products of the rounded operands (tests/model/projection_test.cpp holds them to that).
#pragma once
#include <torch/types.h>

#include "model/weight_format.h"

namespace sinklm {

struct PackedWeight {
  WeightFormat format = WeightFormat::Fp32;
  int64_t N = 0, K = 0;        // the weight's [out, in]
  torch::Tensor panels;        // the layout above
  torch::Tensor scale;         // int8: [ceil(N / 16), ceil(K / 32), 16] float32 block scales, else undefined
  int64_t bytes() const;       // what a product reads of it
};

// Whether this CPU runs the kernel for `format` (fp32: AVX-512F; bf16: + AVX512-BF16; int8: + AVX512-VNNI);
// where not, callers use LibTorch's linear.
bool few_row_kernel_available(WeightFormat format);

// weight [N, K] on the CPU (any float dtype) -> the packed layout in `format`; int8 quantizes it by
// quantize_int8.
PackedWeight pack_few_row_weight(const torch::Tensor& weight, WeightFormat format = WeightFormat::Fp32);

// x [M, K] float32 CPU, bias [N] float32 or undefined -> [M, N] float32. Requires
// few_row_kernel_available(packed.format). Parallel over column panels with LibTorch's intra-op threads.
torch::Tensor few_row_matmul(const torch::Tensor& x, const PackedWeight& packed, const torch::Tensor& bias);

// The reference: the same product in float64 of the operands rounded as `format` rounds them (x and the
// weight to bf16; x quantized per block of 32 and the weight by quantize_int8), with LibTorch's ops. [M, N]
// float64; the kernel differs from it by float32 rounding only.
torch::Tensor few_row_matmul_reference(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       WeightFormat format);

}  // namespace sinklm
