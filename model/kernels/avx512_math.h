// Vector math for the AVX-512 kernels (model/kernels/few_row_matmul.cpp, model/kernels/packed_qkv_attention.cpp,
// model/kernels/cache_attention_kernel.cpp, model/kernels/softmax_cross_entropy.cpp): lane masks, and what their softmaxes
// need that LibTorch's headers do not offer outside its own dispatch. Callers are compiled for AVX-512
// function by function (target attribute) and run only where core/system/cpu_features.h says it is present.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace sinklm {

constexpr int64_t kLanes = 16;  // float32 lanes of an AVX-512 register

// The lanes of a register that hold one of the `left` float32 values still to go (all 16, some, or none).
inline __mmask16 lane_mask(int64_t left) {
  return left >= kLanes ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

// exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2, exp(r) by its degree-6 Taylor polynomial
// (relative error ~1e-7, like a float32 libm); 0 below -87, where float32 leaves its normal range.
__attribute__((target("avx512f"))) inline __m512 exp_ps(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln 2 in two parts (Cephes)
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), _mm512_scalef_ps(p, n));
}

// 2^x, 0 in the lanes `keep` lacks: 2^n p(f), n = round(x), |f| <= 1/2, p of degree 4 fitted to 2^f on
// [-1/2, 1/2] for least relative error (below 3e-6, measured on 200,001 points): for values rounded to bf16
// next (2^-9 apart), at half exp_ps's instructions. x must be finite in a kept lane; a large negative x
// underflows to 0 (scalef).
__attribute__((target("avx512f"))) inline __m512 exp2_ps_coarse(__m512 x, __mmask16 keep) {
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(9.570086374878883e-3f);
  for (float c : {5.591785907745361e-2f, 2.402474582195282e-1f, 6.931217908859253e-1f, 9.999992847442627e-1f})
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
  return _mm512_maskz_scalef_ps(keep, p, n);
}

// max and sum of exp(x - shift) over x[0, n).
__attribute__((target("avx512f"))) inline float max_of(const float* x, int64_t n) {
  __m512 m = _mm512_set1_ps(-__builtin_inff());
  for (int64_t j = 0; j < n; j += kLanes) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, lane_mask(n - j), x + j));
  return _mm512_reduce_max_ps(m);
}

__attribute__((target("avx512f"))) inline float sum_exp(const float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 mask = lane_mask(n - j);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j), s))));
  }
  return _mm512_reduce_add_ps(sum);
}

}  // namespace sinklm
