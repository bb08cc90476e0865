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
//                                        (AVX512-BF16 vdpbf16ps; AVX2: widened to float32, FMA), + b
//   int8  G = 4  uint8 = q[n, k] + 128    blocks of 32 k as llama.cpp's q8_0 (model/io/weight_format.h): the
//                (q, scale[n, b]:        weight by quantize_int8, x the same way per row at each step
//                model/io/weight_format.h)  (xq, a[m, b]); quads of u8 x s8 summed into int32 (AVX512-VNNI
//                                        vpdpbusd), each block's sum less its excess 128 Σ xq (the row's,
//                                        since the weights are stored + 128) scaled by a[m, b] scale[n, b]
//                                        into float32, + b. AVX2: q = u xor 128, |q| times xq with q's
//                                        sign (vpmaddubsw, vpmaddwd) into int32, no excess.
//
// On a CPU with AMX-INT8 (Intel Sapphire Rapids and later) int8's whole tiles of 16 rows run as tile products,
// one int8 block of one panel per instruction (model/kernels/few_row_amx.inc), scaled as the AVX-512 kernel
// scales its block sums: the two agree to the bit, so a stream's result does not depend on how many streams
// share its step; the rows left over (and K not a multiple of 32) take AVX-512.
//
// One 64-byte weight load feeds one multiply-add per row (AVX2: two 32-byte halves), so each weight byte is
// read once per step however many streams decode; rows come in tiles of up to 16 (AVX-512 int8: 8, whose sums
// take two registers; AVX2: 4 for bf16, 2 for int8, in 16 registers; each tile re-reads the panel from
// cache). The tiles are written once for both sets (model/kernels/few_row_tile.inc). Sums run over
// k in order: fp32 results differ from BLAS by rounding only; bf16 and int8 results are exact up to float32
// rounding of the products of the rounded operands (tests/model/projection_test.cpp holds them to that).
#pragma once
#include <torch/types.h>

#include <vector>

#include "core/system/cpu_features.h"
#include "model/io/weight_format.h"

namespace sinklm {

struct PackedWeight {
  WeightFormat format = WeightFormat::Fp32;
  int64_t N = 0, K = 0;        // the weight's [out, in]
  torch::Tensor panels;        // the layout above
  torch::Tensor scale;         // int8: [ceil(N / 16), ceil(K / 32), 16] float32 block scales, else undefined
  int64_t bytes() const;       // what a product reads of it
};

// The instruction sets this CPU runs the kernel for `format` in, widest first: AMX (int8 only: AMX-INT8 beside
// AVX-512 VNNI), AVX-512 (fp32: AVX-512F; bf16: + AVX512-BF16; int8: + AVX512-BW and AVX512-VNNI), then AVX2
// with FMA (bf16 and int8 only: model/kernels/few_row_avx2.inc). Empty: callers use LibTorch's linear.
std::vector<InstructionSet> few_row_kernel_sets(WeightFormat format);
bool few_row_kernel_available(WeightFormat format);  // some set runs it: few_row_kernel_sets(format) is not empty

// weight [N, K] on the CPU (any float dtype) -> the packed layout in `format`; int8 quantizes it by
// quantize_int8.
PackedWeight pack_few_row_weight(const torch::Tensor& weight, WeightFormat format = WeightFormat::Fp32);

// x [M, K] float32 CPU, bias [N] float32 or undefined -> [M, N] float32. Requires
// few_row_kernel_available(packed.format). Parallel over column panels with LibTorch's intra-op threads.
torch::Tensor few_row_matmul(const torch::Tensor& x, const PackedWeight& packed, const torch::Tensor& bias);
// The same in one of few_row_kernel_sets(packed.format) (few_row_matmul takes the first): tests and the kernel
// check run every set the CPU has.
torch::Tensor few_row_matmul_in(InstructionSet set, const torch::Tensor& x, const PackedWeight& packed,
                                const torch::Tensor& bias);

// The reference: the same product in float64 of the operands rounded as `format` rounds them (x and the
// weight to bf16; x quantized per block of 32 and the weight by quantize_int8), with LibTorch's ops. [M, N]
// float64; the kernel differs from it by float32 rounding only.
torch::Tensor few_row_matmul_reference(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       WeightFormat format);

}  // namespace sinklm
