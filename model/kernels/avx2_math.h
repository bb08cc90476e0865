// Vector helpers for the AVX2 kernels (model/kernels/few_row_avx2.inc, model/kernels/cache_attention_kernel.cpp):
// tail masks and 16 float32 lanes as two registers, the width of the AVX-512 kernels' register, so that both
// instruction sets read the same 16-column panels. Callers are compiled for AVX2 and FMA function by function
// (target attribute or `#pragma GCC target`) and run only where core/system/cpu_features.h says both are present.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace sinklm {

constexpr int64_t kAvx2Lanes = 8;  // float32 lanes of an AVX2 register

// The lanes of a register that hold one of the `left` float32 values still to go (all 8, some, or none), as
// the sign bits _mm256_maskload_ps and _mm256_maskstore_ps read.
__attribute__((target("avx2"))) inline __m256i lane_mask8(int64_t left) {
  const int n = left >= kAvx2Lanes ? static_cast<int>(kAvx2Lanes) : left <= 0 ? 0 : static_cast<int>(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 16 float32 lanes: lo holds 0..7, hi 8..15.
struct F32x16 {
  __m256 lo, hi;
};

__attribute__((target("avx2"))) inline F32x16 zeros16() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }

// The first min(16, n) values at p; lanes past n read as 0 and are never touched in memory.
__attribute__((target("avx2"))) inline F32x16 load16(const float* p, int64_t n) {
  if (n >= 2 * kAvx2Lanes) return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + kAvx2Lanes)};
  return {_mm256_maskload_ps(p, lane_mask8(n)), _mm256_maskload_ps(p + kAvx2Lanes, lane_mask8(n - kAvx2Lanes))};
}

__attribute__((target("avx2"))) inline void store16(float* p, F32x16 v, int64_t n) {
  if (n >= 2 * kAvx2Lanes) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + kAvx2Lanes, v.hi);
    return;
  }
  _mm256_maskstore_ps(p, lane_mask8(n), v.lo);
  _mm256_maskstore_ps(p + kAvx2Lanes, lane_mask8(n - kAvx2Lanes), v.hi);
}

__attribute__((target("avx2"))) inline F32x16 add16(F32x16 a, F32x16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}

}  // namespace sinklm
