#include "model/kernels/prompt_attention/online_softmax_kernel.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/system/cpu_features.h"
#include "model/kernels/avx512_math.h"

namespace sinklm {
namespace {

using c10::BFloat16;
constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Pointers to one (head, query row) of the block and of the state.
template <typename T>
struct Row {
  T* scores;
  float* max;
  float* sum;
  float* out;
  int64_t t;  // the query's stream position
};

void check_block(const torch::Tensor& scores, const torch::Tensor& positions, const OnlineSoftmax& state) {
  SINKLM_ASSERT(scores.dim() == 3 && scores.is_contiguous() && scores.device().is_cpu(),
                "scores must be [H, T, N] contiguous on the CPU");
  SINKLM_ASSERT(scores.scalar_type() == torch::kFloat32 || scores.scalar_type() == torch::kBFloat16, "scores ",
                scores.scalar_type());
  SINKLM_ASSERT(positions.scalar_type() == torch::kInt64 && positions.is_contiguous() && positions.device().is_cpu() &&
                    positions.numel() == scores.size(2),
                "positions must be [N] int64 on the CPU");
  const int64_t H = scores.size(0), T = scores.size(1);
  for (const auto* t : {&state.max, &state.sum, &state.out})
    SINKLM_ASSERT(t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->size(0) == H && t->size(1) == T,
                  "online softmax state must be float32 [H, T(, D)] contiguous");
}

// Runs fold(row, N, positions, D) for every (head, query row) of the block, in parallel.
template <typename T, typename Fold>
void for_each_row(const torch::Tensor& scores, const torch::Tensor& positions, const WindowVisibility& visibility,
                  OnlineSoftmax& state, const Fold& fold) {
  check_block(scores, positions, state);
  const int64_t T_rows = scores.size(1), N = scores.size(2), D = state.out.size(2);
  T* s = static_cast<T*>(scores.data_ptr());
  float* max = state.max.data_ptr<float>();
  float* sum = state.sum.data_ptr<float>();
  float* out = state.out.data_ptr<float>();
  const int64_t* pos = positions.data_ptr<int64_t>();
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, N));
  at::parallel_for(0, scores.size(0) * T_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      fold(Row<T>{s + r * N, max + r, sum + r, out + r * D, visibility.first_query + r % T_rows}, N, pos, D);
  });
}

// The positions of a block: whether every slot holds one, and their least and greatest. A query that sees both
// ends of a block with no empty slot sees all of it (the window is an interval, the sinks lie below it), which
// spares most rows of a long prompt the per-column mask.
struct PositionRange {
  bool all_held = true;
  int64_t least = 0, greatest = -1;
  PositionRange(const int64_t* p, int64_t n) {
    if (n == 0) return;
    least = *std::min_element(p, p + n);
    greatest = *std::max_element(p, p + n);
    all_held = least >= 0;
  }
  bool sees_all(int64_t t, const WindowVisibility& v) const {
    return all_held && greatest <= t && (least > t - v.recent || greatest < v.sinks);
  }
};

template <typename T>
void fold_row_reference(const Row<T>& row, int64_t N, const int64_t* pos, int64_t D, const WindowVisibility& v,
                        float scale) {
  float m = *row.max;
  for (int64_t j = 0; j < N; ++j)
    if (v.sees(row.t, pos[j])) m = std::max(m, scale * static_cast<float>(row.scores[j]));
  if (m == kMinusInfinity) {
    std::fill(row.scores, row.scores + N, T(0.0f));
    return;
  }
  const float alpha = std::exp(*row.max - m);  // 0 for a row's first visible column
  float added = 0;
  for (int64_t j = 0; j < N; ++j) {
    const float p = v.sees(row.t, pos[j]) ? std::exp(scale * static_cast<float>(row.scores[j]) - m) : 0.0f;
    row.scores[j] = T(p);
    added += p;
  }
  *row.sum = *row.sum * alpha + added;
  *row.max = m;
  for (int64_t d = 0; d < D; ++d) row.out[d] *= alpha;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

__m512 load16(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
__m512 load16(const BFloat16* p, __mmask16 k) {  // bfloat16 is float32's upper half
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}
void store16(float* p, __mmask16 k, __m512 x) { _mm512_mask_storeu_ps(p, k, x); }
void store16(BFloat16* p, __mmask16 k, __m512 x) {  // rounded to nearest even, as c10::BFloat16(float) rounds
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  _mm256_mask_storeu_epi16(p, k, _mm512_cvtepi32_epi16(rounded));
}

// The lanes of columns j .. j + 15 (of `left` still to go) that query t sees.
__mmask16 visible16(const int64_t* pos, int64_t left, int64_t t, const WindowVisibility& v) {
  const __mmask16 tail = lane_mask(left);
  const auto half = [&](const int64_t* p, __mmask8 k) -> __mmask8 {
    const __m512i x = _mm512_maskz_loadu_epi64(k, p);
    const __mmask8 held = _mm512_mask_cmpge_epi64_mask(k, x, _mm512_setzero_si512()) &
                          _mm512_cmple_epi64_mask(x, _mm512_set1_epi64(t));
    return held & (_mm512_cmplt_epi64_mask(x, _mm512_set1_epi64(v.sinks)) |
                   _mm512_cmpgt_epi64_mask(x, _mm512_set1_epi64(t - v.recent)));
  };
  return __mmask16(half(pos, __mmask8(tail)) | (half(pos + 8, __mmask8(tail >> 8)) << 8));
}

// The reference's two passes, 16 columns at a time; the row's masks are computed once (`masks`: N / 16 rounded up).
template <typename T>
void fold_row_avx512(const Row<T>& row, int64_t N, const int64_t* pos, int64_t D, const WindowVisibility& v,
                     const PositionRange& range, float scale, __mmask16* masks) {
  const bool sees_all = range.sees_all(row.t, v);
  const __m512 s = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(kMinusInfinity);
  for (int64_t j = 0; j < N; j += kLanes) {
    const __mmask16 k = masks[j / kLanes] = sees_all ? lane_mask(N - j) : visible16(pos + j, N - j, row.t, v);
    mx = _mm512_mask_max_ps(mx, k, mx, _mm512_mul_ps(load16(row.scores + j, k), s));
  }
  const float m = std::max(*row.max, _mm512_reduce_max_ps(mx));
  if (m == kMinusInfinity) {
    for (int64_t j = 0; j < N; j += kLanes) store16(row.scores + j, lane_mask(N - j), _mm512_setzero_ps());
    return;
  }
  const float alpha = std::exp(*row.max - m);
  const __m512 shift = _mm512_set1_ps(m);
  __m512 added = _mm512_setzero_ps();
  for (int64_t j = 0; j < N; j += kLanes) {
    const __mmask16 k = masks[j / kLanes];
    const __m512 p = _mm512_maskz_mov_ps(k, exp_ps(_mm512_fmsub_ps(load16(row.scores + j, k), s, shift)));
    store16(row.scores + j, lane_mask(N - j), p);
    added = _mm512_add_ps(added, p);
  }
  *row.sum = *row.sum * alpha + _mm512_reduce_add_ps(added);
  *row.max = m;
  if (alpha == 1.0f) return;
  const __m512 a = _mm512_set1_ps(alpha);
  for (int64_t d = 0; d < D; d += kLanes) {
    const __mmask16 k = lane_mask(D - d);
    _mm512_mask_storeu_ps(row.out + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row.out + d), a));
  }
}

#pragma GCC pop_options

template <typename T>
void fold_block_avx512(const torch::Tensor& scores, const torch::Tensor& positions, const WindowVisibility& v,
                       float scale, OnlineSoftmax& state) {
  const PositionRange range(positions.data_ptr<int64_t>(), positions.numel());
  for_each_row<T>(scores, positions, v, state, [&](const Row<T>& row, int64_t n, const int64_t* pos, int64_t D) {
    thread_local std::vector<__mmask16> masks;
    masks.resize((n + kLanes - 1) / kLanes);
    fold_row_avx512(row, n, pos, D, v, range, scale, masks.data());
  });
}

template <typename T>
void fold_block_reference(const torch::Tensor& scores, const torch::Tensor& positions, const WindowVisibility& v,
                          float scale, OnlineSoftmax& state) {
  for_each_row<T>(scores, positions, v, state, [&](const Row<T>& row, int64_t n, const int64_t* pos, int64_t D) {
    fold_row_reference(row, n, pos, D, v, scale);
  });
}

}  // namespace

torch::Tensor visible_columns(const torch::Tensor& positions, const WindowVisibility& v, int64_t T) {
  auto t = torch::arange(v.first_query, v.first_query + T, torch::kInt64).unsqueeze(1);  // [T, 1]
  auto p = positions.unsqueeze(0);                                                      // [1, N]
  return p.ge(0) & p.le(t) & (p.lt(v.sinks) | p.gt(t - v.recent));
}

bool fold_score_block_kernel_applies(const torch::Tensor& scores) {
  static const bool cpu = cpu_has_avx512f() && SINKLM_CPU_HAS("avx512bw") && SINKLM_CPU_HAS("avx512vl");
  return cpu && scores.device().is_cpu() &&
         (scores.scalar_type() == torch::kFloat32 || scores.scalar_type() == torch::kBFloat16);
}

void fold_score_block(const torch::Tensor& scores, const torch::Tensor& positions, const WindowVisibility& visibility,
                      float scale, OnlineSoftmax& state) {
  SINKLM_ASSERT(fold_score_block_kernel_applies(scores), "fold_score_block needs an AVX-512 CPU and float scores");
  if (scores.scalar_type() == torch::kFloat32) fold_block_avx512<float>(scores, positions, visibility, scale, state);
  else fold_block_avx512<BFloat16>(scores, positions, visibility, scale, state);
}

void fold_score_block_reference(const torch::Tensor& scores, const torch::Tensor& positions,
                                const WindowVisibility& visibility, float scale, OnlineSoftmax& state) {
  if (scores.scalar_type() == torch::kFloat32) fold_block_reference<float>(scores, positions, visibility, scale, state);
  else fold_block_reference<BFloat16>(scores, positions, visibility, scale, state);
}

}  // namespace sinklm
