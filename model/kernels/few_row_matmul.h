// y = x · Wᵀ + b for products with few rows on a CPU: a decode step multiplies every weight matrix by one
// row per stream (1 to a few dozen rows). BLAS sgemm repacks the whole weight on every such call (measured
// here: MKL spent more time copying the weight into its panel layout than multiplying), and its
// matrix-vector path streams a row-major weight at a fraction of the memory bandwidth. This kernel packs
// the weight once, into panels of 16 output columns:
//
//   packed [ceil(N / 16), K, 16] float32: packed[p, k, j] = W[16 p + j, k], 0 past column N
//
// and computes each panel for up to 16 rows in AVX-512 registers (one 16-wide weight load feeds one
// multiply-add per row), so each weight byte is read once per step however many streams decode. Rows past
// 16 go in tiles of 16 (each tile re-reads the panel from cache). Sums run over k in order in float32, as a
// plain loop would: results differ from BLAS by rounding only.
#pragma once
#include <torch/types.h>

namespace sinklm {

// weight [N, K] float32 on the CPU -> the packed layout above.
torch::Tensor pack_few_row_weight(const torch::Tensor& weight);

// Callers check cpu_has_avx512f() (core/cpu_features.h) first; elsewhere they use LibTorch's linear.
// x [M, K] float32 CPU, packed from pack_few_row_weight (N columns), bias [N] or undefined -> [M, N].
// Parallel over column panels with LibTorch's intra-op threads.
torch::Tensor few_row_matmul(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& bias, int64_t N);

}  // namespace sinklm
