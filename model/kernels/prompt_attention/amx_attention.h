// A prompt chunk's attention over one run of keys on AMX tiles (Intel Sapphire Rapids and later): bf16 queries,
// keys and values, float32 scores, sums and outputs, folded into the running softmax of every query row
// (model/kernels/prompt_attention/online_softmax_kernel.h: OnlineSoftmax), as decode/attention/chunk_attention.h folds a run.
//
// Why a kernel: with a head size of 64 the two products of blocked attention are small ([T, 64] x [64, N] and
// [T, N] x [N, 64]); as oneDNN batched matmuls they ran at a quarter of the large-GEMM rate, with the scores
// leaving as bf16 and the running softmax a separate pass over them. Here the 16 queries of a block are two
// tiles, each 32 keys are one score product (scores transposed: a key per tile row, a query per lane, so the
// running max and sum of 16 queries are vector operations with no horizontal reductions), the probabilities
// go straight back into a tile, and the 16 x D outputs stay in tiles across the run.
//
// Lazy rescaling (FlashAttention-4): a row's reference maximum is raised only when a score exceeds it by more
// than kLazyRescale, so the outputs in the tiles are rarely rescaled; a probability is at most e^kLazyRescale,
// far inside float32 and bf16. out / sum is the softmax's output whatever the reference.
#pragma once
#include <torch/types.h>

#include "model/kernels/prompt_attention/online_softmax_kernel.h"

namespace sinklm {

constexpr float kLazyRescale = 8.0f;

// Whether amx_attention_fold runs here for these queries: an AMX-BF16 CPU the process may use
// (core/system/cpu_features.h), bf16 queries on the CPU, a head size of 32 or 64.
bool amx_attention_applies(const torch::Tensor& queries);

// Folds one run of keys into the running softmax of the chunk's query rows.
//   queries [H, T, D], keys and values [H, N, D]: bf16 on the CPU, keys with their rows or their columns
//   contiguous (a cache stores them [H, D, N]: packed per head by a transpose in registers), queries and values
//   with other strides copied; positions [N] int64
//   (CPU, contiguous): each key's stream position (-1: an empty slot); visibility: who sees what.
// For each (head, row) with s = q · k (bf16 products summed in float32) over the visible keys, and m' a
// reference at most kLazyRescale below the running maximum of scale · s (the maximum itself when a row had
// none): sum = sum · exp(max − m') + Σ exp(scale · s − m'); out = out · exp(max − m') + Σ bf16(exp(scale · s −
// m')) · v; max = m'. A row that has seen nothing visible keeps max −inf, sum and out unchanged.
void amx_attention_fold(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                        const torch::Tensor& positions, const WindowVisibility& visibility, float scale,
                        OnlineSoftmax& state);
// The same in plain scalar C++, with the exact running maximum: the reference the kernel is tested against.
void amx_attention_fold_reference(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                                  const torch::Tensor& positions, const WindowVisibility& visibility, float scale,
                                  OnlineSoftmax& state);

}  // namespace sinklm
