#include "model/kernels/cache_attention_kernel.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "model/kernels/avx512_math.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace sinklm {
namespace {

using c10::BFloat16;
constexpr int kMaxChunks = 8;   // D up to 128

// 16 stored values as float32; the masked forms read only the lanes in `mask` (0 elsewhere), so a tail never
// reads past the tensor.
__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 load16(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, p);
}
__attribute__((target("avx512f"))) inline __m512 load16(const BFloat16* p) {  // bfloat16: float32's upper half
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
__attribute__((target("avx512f"))) inline __m512 load16(const BFloat16* p, __mmask16 mask) {
  BFloat16 lanes[kLanes] = {};  // AVX-512F has no 16-bit masked load: the tail goes through a buffer
  for (int i = 0; i < kLanes; ++i)
    if (mask >> i & 1) lanes[i] = p[i];
  return load16(lanes);
}

// Per (stream, head) pointers and strides into a [m, H, width, D] tensor of T.
template <typename T>
struct CacheView {
  const T* data;
  int64_t stream_stride, head_stride, row_stride, dim_stride;
  const T* at(int64_t i, int64_t h) const { return data + i * stream_stride + h * head_stride; }
};

template <typename T>
CacheView<T> view_of(const torch::Tensor& t) {
  return {static_cast<const T*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// scores[j] = <q, keys[:, j]> for j in [0, columns), columns <= 16 * NB, keys stored transposed (row d of the
// [D, columns] block at keys + d * dim_stride, entries contiguous). NB registers hold 16 scores each while d
// runs outer: NB independent multiply-adds hide the latency and nothing but the keys moves through memory.
template <typename T, int NB>
__attribute__((target("avx512f"))) void score_block(const float* q, int64_t D, const T* keys, int64_t dim_stride,
                                                    int64_t columns, float* scores) {
  const int64_t left = columns - (NB - 1) * kLanes;  // 1..16 in the last register
  const __mmask16 tail = lane_mask(left);
  __m512 acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    const __m512 qd = _mm512_set1_ps(q[d]);
    const T* k = keys + d * dim_stride;
    for (int b = 0; b < NB - 1; ++b) acc[b] = _mm512_fmadd_ps(qd, load16(k + b * kLanes), acc[b]);
    acc[NB - 1] = _mm512_fmadd_ps(qd, load16(k + (NB - 1) * kLanes, tail), acc[NB - 1]);
  }
  for (int b = 0; b < NB - 1; ++b) _mm512_storeu_ps(scores + b * kLanes, acc[b]);
  _mm512_mask_storeu_ps(scores + (NB - 1) * kLanes, tail, acc[NB - 1]);
}

template <typename T>
using ScoreFn = void (*)(const float*, int64_t, const T*, int64_t, int64_t, float*);
constexpr int kBlockRegisters = 16;  // 256 scores per block: half the register file
template <typename T, size_t... I>
constexpr std::array<ScoreFn<T>, sizeof...(I)> score_table(std::index_sequence<I...>) {
  return {&score_block<T, static_cast<int>(I) + 1>...};
}
template <typename T>
constexpr auto kScore = score_table<T>(std::make_index_sequence<kBlockRegisters>());  // [registers - 1]

// The same for any width: d runs outer and the scores accumulate in place (width floats stay in L1), so the
// block is read row after row, each row sequentially, which the hardware prefetcher follows at any width (a
// register tile over 256 columns of a wider block would hop between rows, a page apart at width 1024).
template <typename T>
__attribute__((target("avx512f"))) void score_rows(const float* q, int64_t D, const T* keys, int64_t dim_stride,
                                                   int64_t width, float* scores) {
  const int64_t full = width / kLanes * kLanes;
  const __mmask16 tail = lane_mask(width - full);
  for (int64_t d = 0; d < D; ++d) {
    const __m512 qd = _mm512_set1_ps(q[d]);
    const T* k = keys + d * dim_stride;
    const bool first = d == 0;
    for (int64_t j = 0; j < full; j += kLanes) {
      const __m512 product = _mm512_mul_ps(qd, load16(k + j));
      _mm512_storeu_ps(scores + j, first ? product : _mm512_add_ps(product, _mm512_loadu_ps(scores + j)));
    }
    if (!tail) continue;
    const __m512 product = _mm512_mul_ps(qd, load16(k + full, tail));
    _mm512_mask_storeu_ps(scores + full, tail,
                          first ? product : _mm512_add_ps(product, _mm512_maskz_loadu_ps(tail, scores + full)));
  }
}

// scores[j] = <q, keys[:, j]> for j in [0, width): in registers up to 256 columns (a cache of 256 entries is
// one contiguous block), row by row through L1 beyond.
template <typename T>
void score_columns(const float* q, int64_t D, const T* keys, int64_t dim_stride, int64_t width, float* scores) {
  if (width <= kBlockRegisters * kLanes)
    return kScore<T>[(width + kLanes - 1) / kLanes - 1](q, D, keys, dim_stride, width, scores);
  score_rows(q, D, keys, dim_stride, width, scores);
}

// out = sum_j probs[j] * values row j. C = D / 16. Four partial sums (j mod 4) keep four multiply-adds in
// flight per register of the output instead of one chain as long as the cache.
template <typename T, int C>
__attribute__((target("avx512f"))) void mix_rows(const float* probs, const T* values, int64_t row_stride,
                                                 int64_t width, float* out) {
  constexpr int kChains = 4;
  __m512 acc[kChains][C];
  for (int a = 0; a < kChains; ++a)
    for (int c = 0; c < C; ++c) acc[a][c] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + kChains <= width; j += kChains)
    for (int a = 0; a < kChains; ++a) {
      const __m512 p = _mm512_set1_ps(probs[j + a]);
      const T* v = values + (j + a) * row_stride;
      for (int c = 0; c < C; ++c) acc[a][c] = _mm512_fmadd_ps(p, load16(v + c * kLanes), acc[a][c]);
    }
  for (; j < width; ++j) {
    const __m512 p = _mm512_set1_ps(probs[j]);
    const T* v = values + j * row_stride;
    for (int c = 0; c < C; ++c) acc[0][c] = _mm512_fmadd_ps(p, load16(v + c * kLanes), acc[0][c]);
  }
  for (int c = 0; c < C; ++c)
    _mm512_storeu_ps(out + c * kLanes,
                     _mm512_add_ps(_mm512_add_ps(acc[0][c], acc[1][c]), _mm512_add_ps(acc[2][c], acc[3][c])));
}

template <typename T>
using MixFn = void (*)(const float*, const T*, int64_t, int64_t, float*);
template <typename T, size_t... I>
constexpr std::array<MixFn<T>, sizeof...(I)> mix_table(std::index_sequence<I...>) {
  return {&mix_rows<T, static_cast<int>(I) + 1>...};
}
template <typename T>
constexpr auto kMix = mix_table<T>(std::make_index_sequence<kMaxChunks>());  // [D / 16 - 1]

// Runs body(i, h) for every (stream, head) pair, in parallel.
template <typename Body>
void for_each_stream_head(int64_t m, int64_t H, const Body& body) {
  at::parallel_for(0, m * H, 16, [&](int64_t begin, int64_t end) {
    for (int64_t ih = begin; ih < end; ++ih) body(ih / H, ih % H);
  });
}

// entries [n, H, D] float32 into cache [m, H, width, D] of T at [rows[i], :, columns[i]].
template <typename T>
void store_entries(const torch::Tensor& cache, const torch::Tensor& entries, const int64_t* rows, const int64_t* columns) {
  const int64_t n = entries.size(0), H = entries.size(1), D = entries.size(2);
  const auto e = entries.to(torch::kFloat32).contiguous();
  const float* from = e.data_ptr<float>();
  T* to = static_cast<T*>(cache.data_ptr());
  const int64_t s0 = cache.stride(0), s1 = cache.stride(1), s2 = cache.stride(2), s3 = cache.stride(3);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h) {
      T* at = to + rows[i] * s0 + h * s1 + columns[i] * s2;
      for (int64_t d = 0; d < D; ++d) at[d * s3] = T(from[(i * H + h) * D + d]);  // bfloat16: round to nearest even
    }
}

template <typename T>
void score_all(const torch::Tensor& keys, const float* q, int64_t r, int64_t split, float* out) {
  const int64_t m = keys.size(0), H = keys.size(1), width = keys.size(2), D = keys.size(3);
  const auto k = view_of<T>(keys);
  for_each_stream_head(m, H, [&](int64_t i, int64_t h) {
    const float* late = q + (i * H + h) * r * D;
    float* row = out + (i * H + h) * width;
    score_columns(late, D, k.at(i, h), k.dim_stride, width, row);
    if (r == 2) score_columns(late + D, D, k.at(i, h), k.dim_stride, std::min(split, width), row);  // the first columns again
  });
}

template <typename T>
void mix_all(const torch::Tensor& values, const float* p, float* out) {
  const int64_t m = values.size(0), H = values.size(1), width = values.size(2), D = values.size(3);
  const auto v = view_of<T>(values);
  const MixFn<T> fn = kMix<T>[D / kLanes - 1];
  for_each_stream_head(m, H, [&](int64_t i, int64_t h) {
    fn(p + (i * H + h) * width, v.at(i, h), v.row_stride, width, out + (i * H + h) * D);
  });
}

bool stored_as_float(const torch::Tensor& cache) { return cache.scalar_type() == torch::kFloat32; }

// The per-tensor halves of cache_attention_kernel_applies.
bool kernel_reads(const torch::Tensor& cache) {
  const auto dtype = cache.scalar_type();
  return cpu_has_avx512f() && cache.dim() == 4 && cache.device().is_cpu() &&
         (dtype == torch::kFloat32 || dtype == torch::kBFloat16) && cache.size(3) % kLanes == 0 &&
         cache.size(3) <= kMaxChunks * kLanes;
}
bool kernel_reads_keys(const torch::Tensor& keys) { return kernel_reads(keys) && keys.stride(2) == 1; }
bool kernel_reads_values(const torch::Tensor& values) { return kernel_reads(values) && values.stride(3) == 1; }

}  // namespace

bool cache_attention_kernel_applies(const torch::Tensor& keys, const torch::Tensor& values) {
  return kernel_reads_keys(keys) && kernel_reads_values(values) && keys.scalar_type() == values.scalar_type();
}

void store_cache_entries(const torch::Tensor& keys, const torch::Tensor& values, const torch::Tensor& rows,
                         const torch::Tensor& columns, const torch::Tensor& new_keys, const torch::Tensor& new_values) {
  SINKLM_ASSERT(rows.numel() == new_keys.size(0) && columns.numel() == rows.numel() &&
                    new_values.sizes() == new_keys.sizes() && keys.size(1) == new_keys.size(1) &&
                    keys.size(3) == new_keys.size(2),
                "keys ", keys.sizes(), ", new keys ", new_keys.sizes(), ", ", rows.numel(), " rows");
  if (!cache_attention_kernel_applies(keys, values)) {
    using torch::indexing::Slice;
    for (auto [cache, entries] : {std::pair{keys, new_keys}, std::pair{values, new_values}})
      cache.index_put_({rows, Slice(), columns}, entries.to(cache.scalar_type()));  // a handle to the same storage
    return;
  }
  const auto r = rows.contiguous(), c = columns.contiguous();  // int64 on the CPU, as the caches
  if (stored_as_float(keys)) {
    store_entries<float>(keys, new_keys, r.data_ptr<int64_t>(), c.data_ptr<int64_t>());
    store_entries<float>(values, new_values, r.data_ptr<int64_t>(), c.data_ptr<int64_t>());
  } else {
    store_entries<BFloat16>(keys, new_keys, r.data_ptr<int64_t>(), c.data_ptr<int64_t>());
    store_entries<BFloat16>(values, new_values, r.data_ptr<int64_t>(), c.data_ptr<int64_t>());
  }
}

torch::Tensor cached_key_scores(const torch::Tensor& queries, const torch::Tensor& keys, int64_t split) {
  SINKLM_ASSERT(keys.dim() == 4 && queries.dim() == 4 && queries.size(2) <= 2, "queries ", queries.sizes(),
                ", keys ", keys.sizes());
  const int64_t r = queries.size(2);
  if (!kernel_reads_keys(keys)) {  // LibTorch: products in the storage dtype
    const auto q = queries.to(keys.scalar_type());
    const auto keys_t = keys.transpose(2, 3);  // [m, H, D, width]
    const int64_t width = keys.size(2);
    auto scores = r == 1 ? torch::matmul(q, keys_t)
                         : torch::cat({torch::matmul(q.narrow(2, 1, 1), keys_t.narrow(3, 0, split)),
                                       torch::matmul(q.narrow(2, 0, 1), keys_t.narrow(3, split, width - split))}, -1);
    return scores.to(torch::kFloat32);
  }
  auto q = queries.to(torch::kFloat32).contiguous();                                      // [m, H, r, D]
  auto scores = torch::empty({keys.size(0), keys.size(1), 1, keys.size(2)}, q.options());  // [m, H, 1, width]
  if (stored_as_float(keys))
    score_all<float>(keys, q.data_ptr<float>(), r, split, scores.data_ptr<float>());
  else
    score_all<BFloat16>(keys, q.data_ptr<float>(), r, split, scores.data_ptr<float>());
  return scores;
}

torch::Tensor cached_value_mix(const torch::Tensor& probs, const torch::Tensor& values) {
  SINKLM_ASSERT(values.dim() == 4 && probs.size(-1) == values.size(2), "probs ", probs.sizes(), ", values ",
                values.sizes());
  if (!kernel_reads_values(values))  // LibTorch: products in the storage dtype
    return torch::matmul(probs.to(values.scalar_type()), values).to(torch::kFloat32);
  auto p = probs.to(torch::kFloat32).contiguous();                                            // [m, H, 1, width]
  auto out = torch::empty({values.size(0), values.size(1), 1, values.size(3)}, p.options());  // [m, H, 1, D]
  if (stored_as_float(values))
    mix_all<float>(values, p.data_ptr<float>(), out.data_ptr<float>());
  else
    mix_all<BFloat16>(values, p.data_ptr<float>(), out.data_ptr<float>());
  return out;
}

}  // namespace sinklm
