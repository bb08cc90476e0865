#include "model/kernels/cache_attention_kernel.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/system/cpu_features.h"
#include "core/error.h"
#include "model/kernels/avx2_math.h"
#include "model/kernels/avx512_math.h"

namespace sinklm {
namespace {

using c10::BFloat16;
using c10::Half;
constexpr int kMaxChunks = 8;  // D up to 128

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

// Per (stream, head) pointers into int8 K/V's entry scales [m, H, width] (float16, entries contiguous); data
// null for the other formats.
struct ScaleView {
  const Half* data = nullptr;
  int64_t stream_stride = 0, head_stride = 0;
  const Half* at(int64_t i, int64_t h) const { return data + i * stream_stride + h * head_stride; }
};

ScaleView scale_view(const torch::Tensor& scales) {
  if (!scales.defined()) return {};
  SINKLM_ASSERT(scales.scalar_type() == torch::kHalf && scales.dim() == 3 && scales.stride(2) == 1, "scales ",
                scales.sizes(), " ", scales.scalar_type());
  return {static_cast<const Half*>(scales.data_ptr()), scales.stride(0), scales.stride(1)};
}

// int8's exact float32 copies of the first `count` columns, [m, H, count, D] (count 0: none). They are read
// as they are (a stream's few sink entries against its thousands of cached ones), sums over d in order.
struct ExactSinks {
  CacheView<float> view{};
  int64_t count = 0, dims = 0;
  // scores[s] = <q, copy s> for s < count.
  void score(const float* q, int64_t i, int64_t h, float* scores) const {
    const float* at = view.at(i, h);
    for (int64_t s = 0; s < count; ++s) {
      float sum = 0;
      for (int64_t d = 0; d < dims; ++d) sum += q[d] * at[s * view.row_stride + d * view.dim_stride];
      scores[s] = sum;
    }
  }
  // out[d] += sum_s probs[s] copy s[d].
  void mix(const float* probs, int64_t i, int64_t h, float* out) const {
    const float* at = view.at(i, h);
    for (int64_t d = 0; d < dims; ++d) {
      float sum = 0;
      for (int64_t s = 0; s < count; ++s) sum += probs[s] * at[s * view.row_stride + d * view.dim_stride];
      out[d] += sum;
    }
  }
};

ExactSinks exact_sinks(const torch::Tensor& copies, const torch::Tensor& cache) {
  if (!copies.defined()) return {};
  SINKLM_ASSERT(copies.scalar_type() == torch::kFloat32 && copies.dim() == 4 && copies.size(0) == cache.size(0) &&
                    copies.size(1) == cache.size(1) && copies.size(2) <= cache.size(2) && copies.size(3) == cache.size(3),
                "exact sink copies ", copies.sizes(), " ", copies.scalar_type(), " of a cache ", cache.sizes());
  return {view_of<float>(copies), copies.size(2), copies.size(3)};
}

// Runs body(i, h) for every (stream, head) pair, in parallel. A pair reads `elements` cached values; a task
// takes enough pairs to read at least kTaskElements, so one stream's 12 heads over a long cache still split
// between threads (decode's attention at one stream), while short caches stay on one thread.
constexpr int64_t kTaskElements = 1 << 15;
template <typename Body>
void for_each_stream_head(int64_t m, int64_t H, int64_t elements, const Body& body) {
  const int64_t grain = std::max<int64_t>(1, kTaskElements / std::max<int64_t>(1, elements));
  at::parallel_for(0, m * H, grain, [&](int64_t begin, int64_t end) {
    for (int64_t ih = begin; ih < end; ++ih) body(ih / H, ih % H);
  });
}

// 16 float32 lanes in one AVX-512 register. bfloat16 is float32's upper half: a load widens it by a shift.
namespace avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f")
struct V16 {
  using Vec = __m512;
  using Tail = __mmask16;
  static constexpr int kBlockRegisters = 16;  // 256 scores per block: half the register file
  static constexpr int kChains = 4;
  static Tail tail(int64_t left) { return lane_mask(left); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const float* p, Tail tail) { return _mm512_maskz_loadu_ps(tail, p); }
  static Vec load(const BFloat16* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static Vec load(const BFloat16* p, Tail tail) {
    BFloat16 lanes[kLanes] = {};  // AVX-512F has no 16-bit masked load: the tail goes through a buffer
    for (int i = 0; i < kLanes; ++i)
      if (tail >> i & 1) lanes[i] = p[i];
    return load(lanes);
  }
  static Vec load(const int8_t* p) {  // int8 K/V: widened exactly; the entry scales are applied apart
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static Vec load(const int8_t* p, Tail tail) {
    int8_t lanes[kLanes] = {};  // nor an 8-bit one
    for (int i = 0; i < kLanes; ++i)
      if (tail >> i & 1) lanes[i] = p[i];
    return load(lanes);
  }
  static Vec load(const Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static Vec load(const Half* p, Tail tail) {
    Half lanes[kLanes] = {};
    for (int i = 0; i < kLanes; ++i)
      if (tail >> i & 1) lanes[i] = p[i];
    return load(lanes);
  }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, Vec v, Tail tail) { _mm512_mask_storeu_ps(p, tail, v); }
};
#include "model/kernels/cache_attention_loops.inc"
#pragma GCC pop_options
}  // namespace avx512

// 16 float32 lanes in two AVX2 registers; fewer of them per block and one chain per output (16 registers in
// all, not 32).
namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
struct V16 {
  using Vec = F32x16;
  struct Tail {
    __m256i lo, hi;  // lane masks of lanes 0..7 and 8..15
    int64_t left;    // lanes in the tail
  };
  static constexpr int kBlockRegisters = 6;  // 96 scores per block: 12 of the 16 registers
  static constexpr int kChains = 1;
  static Tail tail(int64_t left) { return {lane_mask8(left), lane_mask8(left - kAvx2Lanes), left}; }
  static Vec zero() { return zeros16(); }
  static Vec set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static Vec fmadd(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static Vec add(Vec a, Vec b) { return add16(a, b); }
  static Vec load(const float* p) { return load16(p, kLanes); }
  static Vec load(const float* p, Tail tail) {
    return {_mm256_maskload_ps(p, tail.lo), _mm256_maskload_ps(p + kAvx2Lanes, tail.hi)};
  }
  static Vec load(const BFloat16* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const auto widen = [](__m128i half) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16)); };
    return {widen(_mm256_castsi256_si128(bits)), widen(_mm256_extracti128_si256(bits, 1))};
  }
  static Vec load(const BFloat16* p, Tail tail) {
    BFloat16 lanes[kLanes] = {};  // through a buffer, as on AVX-512
    for (int64_t i = 0; i < tail.left; ++i) lanes[i] = p[i];
    return load(lanes);
  }
  static Vec load(const int8_t* p) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bits)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bits, 8)))};
  }
  static Vec load(const int8_t* p, Tail tail) {
    int8_t lanes[kLanes] = {};
    for (int64_t i = 0; i < tail.left; ++i) lanes[i] = p[i];
    return load(lanes);
  }
  static Vec load(const Half* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_cvtph_ps(_mm256_castsi256_si128(bits)), _mm256_cvtph_ps(_mm256_extracti128_si256(bits, 1))};
  }
  static Vec load(const Half* p, Tail tail) {
    Half lanes[kLanes] = {};
    for (int64_t i = 0; i < tail.left; ++i) lanes[i] = p[i];
    return load(lanes);
  }
  static void store(float* p, Vec v) { store16(p, v, kLanes); }
  static void store(float* p, Vec v, Tail tail) {
    _mm256_maskstore_ps(p, tail.lo, v.lo);
    _mm256_maskstore_ps(p + kAvx2Lanes, tail.hi, v.hi);
  }
};
#include "model/kernels/cache_attention_loops.inc"
#pragma GCC pop_options
}  // namespace avx2

// entries [n, H, D] into cache [m, H, width, D] of T (any strides) at [rows[i], :, columns[i]]: entries of T as
// they are, others through float32 (bfloat16: rounded to nearest even, as .to() rounds).
template <typename T>
void store_entries(const torch::Tensor& cache, const torch::Tensor& entries, const int64_t* rows, const int64_t* columns) {
  const int64_t n = entries.size(0), H = entries.size(1), D = entries.size(2);
  T* to = static_cast<T*>(cache.data_ptr());
  const int64_t s0 = cache.stride(0), s1 = cache.stride(1), s2 = cache.stride(2), s3 = cache.stride(3);
  const auto copy = [&](const auto* from) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h) {
        T* at = to + rows[i] * s0 + h * s1 + columns[i] * s2;
        for (int64_t d = 0; d < D; ++d) at[d * s3] = T(from[(i * H + h) * D + d]);
      }
  };
  if (entries.scalar_type() == cache.scalar_type()) return copy(static_cast<const T*>(entries.contiguous().data_ptr()));
  copy(entries.to(torch::kFloat32).contiguous().data_ptr<float>());
}

// store_cache_entries for one cache: the loop above for the dtypes a cache is stored in, index_put_ elsewhere.
void store_into(const torch::Tensor& cache, const torch::Tensor& entries, const torch::Tensor& rows,
                const torch::Tensor& columns) {
  const auto r = rows.contiguous(), c = columns.contiguous();  // int64 on the caches' device
  const auto store = [&](auto element) {
    store_entries<decltype(element)>(cache, entries, r.data_ptr<int64_t>(), c.data_ptr<int64_t>());
  };
  if (cache.device().is_cpu()) switch (cache.scalar_type()) {
      case torch::kFloat32: return store(float{});
      case torch::kBFloat16: return store(BFloat16{});
      case torch::kChar: return store(int8_t{});
      case torch::kHalf: return store(Half{});
      default: break;
    }
  using torch::indexing::Slice;
  auto target = cache;  // a handle to the same storage
  target.index_put_({rows, Slice(), columns}, entries.to(cache.scalar_type()));
}

// The per-tensor halves of cache_attention_kernel_applies. AVX2 takes bfloat16 and int8 caches only: float32
// K/V keep LibTorch's products there, so a float32 stream's results on such a CPU do not change with these kernels.
bool kernel_reads(const torch::Tensor& cache) {
  const auto dtype = cache.scalar_type();
  const bool narrow = dtype == torch::kBFloat16 || dtype == torch::kChar;
  const bool isa = cpu_has_avx512f() || (cpu_has_avx2_fma() && narrow);
  return isa && cache.dim() == 4 && cache.device().is_cpu() && (dtype == torch::kFloat32 || narrow) &&
         cache.size(3) % kLanes == 0 && cache.size(3) <= kMaxChunks * kLanes;
}

// Runs fn.template operator()<T>() with T the C++ type of the cache's dtype (float, BFloat16 or int8_t).
template <typename Fn>
void with_element_type(const torch::Tensor& cache, const Fn& fn) {
  switch (cache.scalar_type()) {
    case torch::kFloat32: return fn(float{});
    case torch::kBFloat16: return fn(BFloat16{});
    case torch::kChar: return fn(int8_t{});
    default: SINKLM_ASSERT(false, "cache dtype ", cache.scalar_type(), " passed kernel_reads");
  }
}
// int8 entries are multiplied as float32 (their scales are the caller's); the others in their own dtype.
torch::ScalarType product_dtype(const torch::Tensor& cache) {
  return cache.scalar_type() == torch::kChar ? torch::kFloat32 : cache.scalar_type();
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
                    new_values.sizes() == new_keys.sizes() && new_keys.dim() == 3 && keys.dim() == 4 &&
                    keys.size(1) == new_keys.size(1) && keys.size(3) == new_keys.size(2),
                "keys ", keys.sizes(), ", new keys ", new_keys.sizes(), ", ", rows.numel(), " rows");
  store_into(keys, new_keys, rows, columns);
  store_into(values, new_values, rows, columns);
}

torch::Tensor cached_key_scores(const torch::Tensor& queries, const torch::Tensor& keys, int64_t split,
                                const torch::Tensor& key_scales, const torch::Tensor& sink_keys) {
  SINKLM_ASSERT(keys.dim() == 4 && queries.dim() == 4 && queries.size(2) <= 2, "queries ", queries.sizes(),
                ", keys ", keys.sizes());
  const int64_t r = queries.size(2);
  SINKLM_ASSERT(!sink_keys.defined() || r == 1 || sink_keys.size(2) <= split, sink_keys.size(2),
                " exact sink columns past the ", split, " the sinks' query row takes");
  if (!kernel_reads_keys(keys)) {  // LibTorch: products in the storage dtype (int8: float32)
    const auto dtype = product_dtype(keys);
    const auto q = queries.to(dtype);
    const auto keys_t = keys.transpose(2, 3).to(dtype);  // [m, H, D, width]
    const int64_t width = keys.size(2);
    auto scores = r == 1 ? torch::matmul(q, keys_t)
                         : torch::cat({torch::matmul(q.narrow(2, 1, 1), keys_t.narrow(3, 0, split)),
                                       torch::matmul(q.narrow(2, 0, 1), keys_t.narrow(3, split, width - split))}, -1);
    scores = scores.to(torch::kFloat32);
    if (key_scales.defined()) scores = scores * key_scales.unsqueeze(2).to(torch::kFloat32);
    if (sink_keys.defined())
      scores.narrow(-1, 0, sink_keys.size(2))
          .copy_(torch::matmul(queries.narrow(2, r - 1, 1).to(torch::kFloat32), sink_keys.transpose(2, 3)));
    return scores;
  }
  auto q = queries.to(torch::kFloat32).contiguous();                                      // [m, H, r, D]
  auto scores = torch::empty({keys.size(0), keys.size(1), 1, keys.size(2)}, q.options());  // [m, H, 1, width]
  const float* query = q.data_ptr<float>();
  float* out = scores.data_ptr<float>();
  const ScaleView scales = scale_view(key_scales);
  const ExactSinks sinks = exact_sinks(sink_keys, keys);
  with_element_type(keys, [&](auto element) {
    using T = decltype(element);
    if (!cpu_has_avx512f()) {
      if constexpr (!std::is_same_v<T, float>) avx2::score_all<T>(keys, query, r, split, scales, sinks, out);  // not float32
    } else {
      avx512::score_all<T>(keys, query, r, split, scales, sinks, out);
    }
  });
  return scores;
}

torch::Tensor cached_value_mix(const torch::Tensor& probs, const torch::Tensor& values, const torch::Tensor& value_scales,
                               const torch::Tensor& sink_values) {
  SINKLM_ASSERT(values.dim() == 4 && probs.size(-1) == values.size(2), "probs ", probs.sizes(), ", values ",
                values.sizes());
  SINKLM_ASSERT(!sink_values.defined() || value_scales.defined(), "exact sink copies come with int8 values only");
  if (!kernel_reads_values(values)) {  // LibTorch: products in the storage dtype (int8: float32)
    const auto dtype = product_dtype(values);
    auto p = value_scales.defined() ? probs * value_scales.unsqueeze(2).to(torch::kFloat32) : probs;  // a new tensor
    if (!sink_values.defined()) return torch::matmul(p.to(dtype), values.to(dtype)).to(torch::kFloat32);
    const int64_t S = sink_values.size(2);
    p.narrow(-1, 0, S).zero_();
    return torch::matmul(p.to(dtype), values.to(dtype)).to(torch::kFloat32) +
           torch::matmul(probs.narrow(-1, 0, S).to(torch::kFloat32), sink_values);
  }
  auto p = probs.to(torch::kFloat32).contiguous();                                            // [m, H, 1, width]
  auto out = torch::empty({values.size(0), values.size(1), 1, values.size(3)}, p.options());  // [m, H, 1, D]
  const float* probs_in = p.data_ptr<float>();
  float* mixed = out.data_ptr<float>();
  const ScaleView scales = scale_view(value_scales);
  const ExactSinks sinks = exact_sinks(sink_values, values);
  with_element_type(values, [&](auto element) {
    using T = decltype(element);
    if (!cpu_has_avx512f()) {
      if constexpr (!std::is_same_v<T, float>) avx2::mix_all<T>(values, probs_in, scales, sinks, mixed);  // not float32
    } else {
      avx512::mix_all<T>(values, probs_in, scales, sinks, mixed);
    }
  });
  return out;
}

}  // namespace sinklm
