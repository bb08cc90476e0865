// One key block of blocked ("flash") attention's softmax, for attention whose two products run as batched
// matmuls over blocks of keys (decode/attention/chunk_attention.h, a prompt chunk against a stream cache). The
// block's raw scores are folded into a running softmax per query row (the online softmax of FlashAttention,
// Dao et al. 2022), turned into the block's probabilities in place, and each row's running output is rescaled
// to the new maximum. Nothing [T, Tk] exists: a block of scores is [H, T, N] with N a key block, and the
// caller mixes it into the outputs before the next block overwrites it.
//
// Why a kernel: between the two products the softmax is a mask, a max, an exp, a sum and a rescale. As LibTorch
// ops over [H, T, S + capacity + T] float32 scores they were half a long prompt's time on a CPU whose bf16
// products run on AMX (a dozen passes over a buffer far larger than the caches); here they are two passes over
// a row of N scores in L1.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <limits>

namespace sinklm {

// The sink+window causal rule every stream cache keeps: the query at stream position t sees the key at
// position p iff 0 <= p <= t and (p < sinks or p > t - recent). p = -1 marks an empty slot. Query row i of a
// chunk sits at first_query + i. A full cache is sinks = 0 and recent = kUnbounded.
struct WindowVisibility {
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;
  int64_t first_query = 0;
  int64_t sinks = 0;
  int64_t recent = kUnbounded;
  bool sees(int64_t t, int64_t p) const { return p >= 0 && p <= t && (p < sinks || p > t - recent); }
  // Whether any of the T queries from first_query on sees position p: p is seen by queries p .. p + recent - 1,
  // and by every later one when p < sinks.
  bool seen_by_any(int64_t p, int64_t T) const {
    return p >= 0 && p <= first_query + T - 1 && (p < sinks || p > first_query - recent);
  }
};

// [T, N] bool: which of `positions` [N] (int64, CPU) each of the T queries from first_query on sees (the same
// rule as sees(), for a whole block at once: the mask of the references that form one score buffer).
torch::Tensor visible_columns(const torch::Tensor& positions, const WindowVisibility& v, int64_t T);

// The running softmax of every query row: max [H, T] and sum [H, T] of exp(score - max) over the columns seen
// so far, and out [H, T, D] = sum of exp(score - max) · value. All float32, contiguous. Start: max -inf, sum 0,
// out 0 (or one column already folded in, as a sink column is).
struct OnlineSoftmax {
  torch::Tensor max, sum, out;
};

// scores [H, T, N] (float32 or bfloat16, contiguous, on the CPU): q · k of each query row and key column,
// unscaled; positions [N] int64 (CPU, contiguous): each column's stream position. On return, with
// m' = max(max, scale · s over the row's visible columns):
//   scores[h, i, j] = exp(scale · s[h, i, j] - m'[h, i]) where visible, 0 elsewhere (rounded to scores' dtype);
//   sum = sum · exp(max - m') + the row's new terms (before rounding); out[h, i] *= exp(max - m'); max = m'.
// A row that has seen nothing visible yet keeps max -inf and writes zeros.
bool fold_score_block_kernel_applies(const torch::Tensor& scores);  // an AVX-512 CPU (F, BW, VL), as above
void fold_score_block(const torch::Tensor& scores, const torch::Tensor& positions, const WindowVisibility& visibility,
                      float scale, OnlineSoftmax& state);
// The same in plain scalar C++: the reference the kernel is tested against.
void fold_score_block_reference(const torch::Tensor& scores, const torch::Tensor& positions,
                                const WindowVisibility& visibility, float scale, OnlineSoftmax& state);

}  // namespace sinklm
