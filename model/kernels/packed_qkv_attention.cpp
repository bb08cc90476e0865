#include "model/kernels/packed_qkv_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <immintrin.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/kernels/avx512_math.h"
#include "core/system/cpu_features.h"
#include "core/error.h"

namespace sinklm {
namespace {

constexpr int kTileRows = 8;     // rows of a register tile: 8 rows x 2 registers = 16 accumulators
constexpr int kBlockRows = 16;   // query rows per block: the depth of the key-side products dV, dK

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// out[i, c] (+)= sum_{k < K} a(i, k) * b[k, c] for i < R and NV * 16 columns c from 0: R x NV accumulators in
// registers, one 16-wide load of b per k feeding R multiply-adds each. a(i, k) = a[i * a_row + k * a_col], so a
// tile can be read transposed in place.
template <int R, int NV, bool kAccumulate>
__attribute__((target("avx512f"))) inline void matmul_block(const float* a, int64_t a_row, int64_t a_col, const float* b,
                                                            int64_t ldb, int64_t K, float* out, int64_t ldo) {
  __m512 acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = kAccumulate ? _mm512_loadu_ps(out + i * ldo + v * kLanes) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 bk[NV];
    for (int v = 0; v < NV; ++v) bk[v] = _mm512_loadu_ps(b + k * ldb + v * kLanes);
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * a_row + k * a_col]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(x, bk[v], acc[i][v]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + i * ldo + v * kLanes, acc[i][v]);
}

// out[i, c] (+)= sum_{k < K} a(i, k) * b[k, c] for i < R, c < N (a multiple of 16), 32 columns at a time: a
// tile of at most 8 rows times a matrix, every product of this file (scores, their gradients, outputs).
template <int R, bool kAccumulate>
__attribute__((target("avx512f"))) void tile_matmul(const float* a, int64_t a_row, int64_t a_col, const float* b,
                                                    int64_t ldb, int64_t K, int64_t N, float* out, int64_t ldo) {
  int64_t c = 0;
  for (; c + 2 * kLanes <= N; c += 2 * kLanes) matmul_block<R, 2, kAccumulate>(a, a_row, a_col, b + c, ldb, K, out + c, ldo);
  if (c < N) matmul_block<R, 1, kAccumulate>(a, a_row, a_col, b + c, ldb, K, out + c, ldo);
}

using MatmulFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t);

// The products for a tile of R rows (R = 1 .. kTileRows: the last tile of a sequence may be short).
struct TileKernels {
  MatmulFn matmul;      // out = a b
  MatmulFn matmul_add;  // out += a b
};

template <int R>
constexpr TileKernels tile_kernels() {
  return {tile_matmul<R, false>, tile_matmul<R, true>};
}

const TileKernels& kernels_for(int64_t rows) {
  static const TileKernels table[kTileRows + 1] = {{},
                                                   tile_kernels<1>(), tile_kernels<2>(), tile_kernels<3>(),
                                                   tile_kernels<4>(), tile_kernels<5>(), tile_kernels<6>(),
                                                   tile_kernels<7>(), tile_kernels<8>()};
  SINKLM_ASSERT(rows >= 1 && rows <= kTileRows);
  return table[rows];
}

// out[i, c] (+)= sum_{k < K} a(i, k) * b[k, c] for i < rows (any number: register tiles of up to 8), c < N.
template <bool kAccumulate>
void rows_matmul(int64_t rows, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, int64_t K,
                 int64_t N, float* out, int64_t ldo) {
  for (int64_t i = 0; i < rows; i += kTileRows) {
    const TileKernels& k = kernels_for(std::min<int64_t>(kTileRows, rows - i));
    (kAccumulate ? k.matmul_add : k.matmul)(a + i * a_row, a_row, a_col, b, ldb, K, N, out + i * ldo, ldo);
  }
}

// s[j] = exp(s[j] - shift) for j < valid, 0 for valid <= j < n; returns the sum. s holds round_up(n, 16).
__attribute__((target("avx512f"))) float exp_shifted(float* s, int64_t valid, int64_t n, float shift) {
  const __m512 m = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < valid; j += kLanes) {
    const __mmask16 mask = lane_mask(valid - j);
    const __m512 e = _mm512_maskz_mov_ps(mask, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + j), m)));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  for (; j < n; j += kLanes) _mm512_storeu_ps(s + j, _mm512_setzero_ps());
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx512f"))) void scale_in_place(float* s, int64_t n, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 mask = lane_mask(n - j);
    _mm512_mask_storeu_ps(s + j, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, s + j), f));
  }
}

// ds[j] = p[j] * (ds[j] - delta) for j < n (the softmax's backward; ds holds dP on entry, p is 0 where masked).
__attribute__((target("avx512f"))) void softmax_backward_row(const float* p, float* ds, int64_t n, float delta) {
  const __m512 d = _mm512_set1_ps(delta);
  for (int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 mask = lane_mask(n - j);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, ds + j), d);
    _mm512_mask_storeu_ps(ds + j, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, p + j), g));
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// One attention problem: pointers into contiguous float32 tensors and their shapes.
struct Problem {
  // sink_*: the column's parts, empty where absent (model/sink.h: SinkColumn).
  Problem(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& sink_logit,
          const torch::Tensor& sink_key, const torch::Tensor& sink_value)
      : qkv(qkv.data_ptr<float>()),
        B(qkv.size(0)),
        T(qkv.size(1)),
        H(qkv.size(2)),
        D(qkv.size(3) / 3),
        cos(cos.data_ptr<float>()),
        sin(sin.data_ptr<float>()),
        R(cos.size(-1)),
        rotary_batch_stride(cos.dim() == 3 ? T * R : 0),
        sink(sink_logit.numel() > 0 ? sink_logit.data_ptr<float>() : nullptr),
        sink_key(sink_key.numel() > 0 ? sink_key.data_ptr<float>() : nullptr),
        sink_value(sink_value.numel() > 0 ? sink_value.data_ptr<float>() : nullptr),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)))) {}

  const float* qkv_row(int64_t b, int64_t t, int64_t h) const { return qkv + ((b * T + t) * H + h) * 3 * D; }
  int64_t head_row(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * H + h) * D; }  // into [B, T, H, D]
  const float* cos_at(int64_t b, int64_t t) const { return cos + b * rotary_batch_stride + t * R; }
  const float* sin_at(int64_t b, int64_t t) const { return sin + b * rotary_batch_stride + t * R; }
  int64_t padded_T() const { return round_up(T, kLanes); }
  // The sink column's logit for packed query row q (rotated and scaled by 1/sqrt(D)) of head h:
  // logit_h + q . key_h / sqrt(D).
  float sink_logit_of(const float* q, int64_t h) const {
    return sink[h] + (sink_key ? dot(q, sink_key + h * D, D) : 0.0f);
  }

  const float* qkv;
  int64_t B, T, H, D;
  const float *cos, *sin;
  int64_t R, rotary_batch_stride;
  const float* sink;        // [H], or null for an empty sink_logit (no sink column)
  const float* sink_key;    // [H, D] or null: the column's logit does not depend on the query
  const float* sink_value;  // [H, D] or null: the column adds nothing to the output
  float scale;        // 1 / sqrt(D), folded into the packed queries
};

// GPT-NeoX rotary ("rotate half" on the first R dims), times `scale`:
//   y[d] = x[d] c[d] + (d < R/2 ? -x[d + R/2] : x[d - R/2]) s[d]  (d < R),  y[d] = x[d]  (d >= R).
void rotate(const float* x, const float* c, const float* s, int64_t R, int64_t D, float scale, float* y) {
  const int64_t half = R / 2;
  for (int64_t d = 0; d < R; ++d) y[d] = (x[d] * c[d] + (d < half ? -x[d + half] : x[d - half]) * s[d]) * scale;
  for (int64_t d = R; d < D; ++d) y[d] = x[d] * scale;
}

// Its transpose, for gradients: y = scale * rotateᵀ(g).
void rotate_back(const float* g, const float* c, const float* s, int64_t R, int64_t D, float scale, float* y) {
  const int64_t half = R / 2;
  for (int64_t d = 0; d < R; ++d)
    y[d] = (g[d] * c[d] + (d < half ? g[d + half] * s[d + half] : -g[d - half] * s[d - half])) * scale;
  for (int64_t d = R; d < D; ++d) y[d] = g[d] * scale;
}

constexpr int64_t kPrefetchRows = 8;

void prefetch(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(x + i);
}

// mt[d * ld + t] = m[t * D + d] for t < T, d < D (m row-major, in cache), lanes past T zero: 16 rows at a
// time, one gather and one whole-line store per dim. Scalar stores into the [D, T] layout (a line each,
// 64 KB apart in all) took a third of the forward's time.
__attribute__((target("avx512f"))) void transpose_rows(const float* m, int64_t T, int64_t D, float* mt, int64_t ld) {
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(static_cast<int>(D)));
  for (int64_t t0 = 0; t0 < T; t0 += kLanes) {
    const __mmask16 mask = lane_mask(T - t0);
    for (int64_t d = 0; d < D; ++d)
      _mm512_storeu_ps(mt + d * ld + t0, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, rows, m + t0 * D + d, 4));
  }
}

// One (batch row, head) task's operands, packed once per task; reused across the tasks of one thread.
struct Panels {
  explicit Panels(const Problem& p)
      : q(p.T * p.D), k(p.T * p.D), kt(p.D * p.padded_T()), v(p.T * p.D), vt(p.D * p.padded_T()),
        probs(kBlockRows * p.padded_T()), grads(kBlockRows * p.padded_T()), dq(kBlockRows * p.D), dout(p.T * p.D),
        delta(p.T), dk(p.T * p.D), dv(p.T * p.D) {}

  // q [T, D] rotated and scaled, k [T, D] and kt [D, T_pad] rotated (kt zero past T), v [T, D], and for the
  // backward (dP = dO Vᵀ) vt [D, T_pad].
  void pack(const Problem& p, int64_t b, int64_t h, bool for_backward) {
    const int64_t D = p.D, Tp = p.padded_T();
    for (int64_t t = 0; t < p.T; ++t) {
      const float* x = p.qkv_row(b, t, h);
      // The rows are H * 3D floats apart in memory: ask for the one kPrefetchRows ahead, which the hardware
      // prefetcher does not (reading qkv was two thirds of this loop's time without it).
      if (t + kPrefetchRows < p.T) prefetch(p.qkv_row(b, t + kPrefetchRows, h), 3 * D);
      rotate(x, p.cos_at(b, t), p.sin_at(b, t), p.R, D, p.scale, &q[t * D]);
      rotate(x + D, p.cos_at(b, t), p.sin_at(b, t), p.R, D, 1.0f, &k[t * D]);
      std::memcpy(&v[t * D], x + 2 * D, D * sizeof(float));
    }
    transpose_rows(k.data(), p.T, D, kt.data(), Tp);
    if (for_backward) transpose_rows(v.data(), p.T, D, vt.data(), Tp);
  }

  std::vector<float> q, k, kt, v, vt;
  std::vector<float> probs, grads;  // [kBlockRows, T_pad]: a block's probabilities, and dP / dS
  std::vector<float> dq;            // [kBlockRows, D]
  std::vector<float> dout, delta;   // [T, D] the output's gradient, [T] dO_i . O_i
  std::vector<float> dk, dv;        // [T, D] accumulated over the query tiles
};

// Query rows [i0, i0 + rows) of a block: row r sees keys 0 .. i0 + r, the block keys [0, n), n = i0 + rows.
struct Tile {
  Tile(int64_t i0, int64_t T) : i0(i0), rows(std::min<int64_t>(kBlockRows, T - i0)), n(i0 + rows) {}
  int64_t visible(int64_t r) const { return i0 + r + 1; }
  int64_t i0, rows, n;
};

// Forward of task (b, h): out rows of [B, T, H, D], lse [T] (the softmax's log-normaliser, sink included).
void forward_task(const Problem& p, int64_t b, int64_t h, Panels& w, float* out, float* lse) {
  const int64_t D = p.D, Tp = p.padded_T(), ldo = p.H * D;
  w.pack(p, b, h, /*for_backward=*/false);
  for (int64_t i0 = 0; i0 < p.T; i0 += kBlockRows) {
    const Tile tile(i0, p.T);
    rows_matmul<false>(tile.rows, &w.q[i0 * D], D, 1, w.kt.data(), Tp, D, round_up(tile.n, kLanes), w.probs.data(),
                       Tp);  // S = Q Kᵀ
    float on_sink[kBlockRows];  // each row's probability on the sink column
    for (int64_t r = 0; r < tile.rows; ++r) {
      float* s = &w.probs[r * Tp];
      const int64_t visible = tile.visible(r);
      const float c = p.sink ? p.sink_logit_of(&w.q[(i0 + r) * D], h) : 0.0f;
      float m = max_of(s, visible);
      if (p.sink) m = std::max(m, c);
      const float total = exp_shifted(s, visible, tile.n, m) + (p.sink ? std::exp(c - m) : 0.0f);
      scale_in_place(s, visible, 1.0f / total);
      lse[i0 + r] = m + std::log(total);
      on_sink[r] = p.sink ? std::exp(c - lse[i0 + r]) : 0.0f;
    }
    rows_matmul<false>(tile.rows, w.probs.data(), Tp, 1, w.v.data(), D, tile.n, D, out + p.head_row(b, i0, h),
                       ldo);  // O = P V
    if (p.sink_value)  // O += p_sink value_h
      for (int64_t r = 0; r < tile.rows; ++r) {
        float* o = out + p.head_row(b, i0 + r, h);
        for (int64_t d = 0; d < D; ++d) o[d] += on_sink[r] * p.sink_value[h * D + d];
      }
  }
}

// c[j, :] += sum_{r < rows} m[r, j] a[r, :] for j < n: the products dV += Pᵀ dO and dK += dSᵀ Q, key rows
// against the block's query rows (m read transposed in place).
void accumulate_transposed(const float* m, int64_t ld, const Tile& tile, const float* a, int64_t lda, int64_t D,
                           float* c) {
  rows_matmul<true>(tile.n, m, 1, ld, a, lda, tile.rows, D, c, D);
}

// Backward of task (b, h): writes its q, k, v gradients into dqkv [B, T, H, 3D] and, for a column with a key
// or value, d(key_h), d(value_h) into dkey, dvalue ([D] each); returns d(sink logit).
double backward_task(const Problem& p, int64_t b, int64_t h, Panels& w, const float* dout, const float* out,
                     const float* lse, float* dqkv, double* dkey, double* dvalue) {
  const int64_t D = p.D, Tp = p.padded_T();
  w.pack(p, b, h, /*for_backward=*/true);
  // One pass over this head's rows of dO and O (strided, from memory) before the products, which then read
  // dO from cache: interleaved with them, these loads were half of this function's time.
  for (int64_t t = 0; t < p.T; ++t) {
    if (t + kPrefetchRows < p.T) {
      prefetch(dout + p.head_row(b, t + kPrefetchRows, h), D);
      prefetch(out + p.head_row(b, t + kPrefetchRows, h), D);
    }
    const float* dout_row = dout + p.head_row(b, t, h);
    w.delta[t] = dot(dout_row, out + p.head_row(b, t, h), D);
    std::memcpy(&w.dout[t * D], dout_row, D * sizeof(float));
  }
  std::fill(w.dk.begin(), w.dk.end(), 0.0f);
  std::fill(w.dv.begin(), w.dv.end(), 0.0f);
  double dsink = 0;
  float sink_column_dlogit[kBlockRows];  // a block's dc per row
  for (int64_t i0 = 0; i0 < p.T; i0 += kBlockRows) {
    const Tile tile(i0, p.T);
    const float* dout_tile = &w.dout[i0 * D];
    const int64_t width = round_up(tile.n, kLanes);
    rows_matmul<false>(tile.rows, &w.q[i0 * D], D, 1, w.kt.data(), Tp, D, width, w.probs.data(), Tp);  // S = Q Kᵀ
    rows_matmul<false>(tile.rows, dout_tile, D, 1, w.vt.data(), Tp, D, width, w.grads.data(), Tp);  // dP = dO Vᵀ
    for (int64_t r = 0; r < tile.rows; ++r) {
      const float delta = w.delta[i0 + r];
      exp_shifted(&w.probs[r * Tp], tile.visible(r), tile.n, lse[i0 + r]);          // P = exp(S - lse)
      softmax_backward_row(&w.probs[r * Tp], &w.grads[r * Tp], tile.n, delta);      // dS = P (dP - delta)
      sink_column_dlogit[r] = 0;
      if (!p.sink) continue;
      // The sink's own column: dc = p_sink (dO . value_h - delta).
      const float* q = &w.q[(i0 + r) * D];
      const double on_sink = std::exp(double(p.sink_logit_of(q, h)) - lse[i0 + r]);
      const float* dout_row = dout_tile + r * D;
      const double dc = on_sink * ((p.sink_value ? dot(dout_row, p.sink_value + h * D, D) : 0.0f) - delta);
      dsink += dc;
      sink_column_dlogit[r] = static_cast<float>(dc);
      if (p.sink_key)
        for (int64_t d = 0; d < D; ++d) dkey[d] += dc * q[d];  // c = q . key_h (q already scaled)
      if (p.sink_value)
        for (int64_t d = 0; d < D; ++d) dvalue[d] += on_sink * dout_row[d];
    }
    accumulate_transposed(w.probs.data(), Tp, tile, dout_tile, D, D, w.dv.data());  // dV += Pᵀ dO
    accumulate_transposed(w.grads.data(), Tp, tile, &w.q[i0 * D], D, D, w.dk.data());  // dK += dSᵀ Q
    rows_matmul<false>(tile.rows, w.grads.data(), Tp, 1, w.k.data(), D, tile.n, D, w.dq.data(), D);  // dQ = dS K
    if (p.sink_key)  // dQ += dc key_h
      for (int64_t r = 0; r < tile.rows; ++r)
        for (int64_t d = 0; d < D; ++d) w.dq[r * D + d] += sink_column_dlogit[r] * p.sink_key[h * D + d];
    for (int64_t r = 0; r < tile.rows; ++r)
      rotate_back(&w.dq[r * D], p.cos_at(b, i0 + r), p.sin_at(b, i0 + r), p.R, D, p.scale,
                  dqkv + p.head_row(b, i0 + r, h) * 3);
  }
  for (int64_t t = 0; t < p.T; ++t) {
    float* row = dqkv + p.head_row(b, t, h) * 3;
    rotate_back(&w.dk[t * D], p.cos_at(b, t), p.sin_at(b, t), p.R, D, 1.0f, row + D);
    std::memcpy(row + 2 * D, &w.dv[t * D], D * sizeof(float));
  }
  return dsink;
}

// Runs task(b, h, panels) for every (batch row, head) on LibTorch's intra-op threads, one Panels per thread.
template <typename Task>
void for_each_head(const Problem& p, const Task& task) {
  at::parallel_for(0, p.B * p.H, 1, [&](int64_t begin, int64_t end) {
    Panels panels(p);
    for (int64_t i = begin; i < end; ++i) task(i / p.H, i % p.H, panels);
  });
}

class PackedQkvAttentionFunction : public torch::autograd::Function<PackedQkvAttentionFunction> {
 public:
  // sink_logit [H], sink_key, sink_value [H, D]: empty where absent (autograd::Function takes no undefined inputs).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv, const torch::Tensor& cos,
                               const torch::Tensor& sin, const torch::Tensor& sink_logit, const torch::Tensor& sink_key,
                               const torch::Tensor& sink_value) {
    RECORD_FUNCTION("sinklm::packed_qkv_attention", std::vector<c10::IValue>());  // a row of train.trace_steps
    const Problem p(qkv, cos, sin, sink_logit, sink_key, sink_value);
    auto out = torch::empty({p.B, p.T, p.H * p.D}, qkv.options());  // [B, T, H, D] merged
    auto lse = torch::empty({p.B, p.H, p.T}, qkv.options());
    float* out_data = out.data_ptr<float>();
    float* lse_data = lse.data_ptr<float>();
    for_each_head(p, [&](int64_t b, int64_t h, Panels& w) {
      forward_task(p, b, h, w, out_data, lse_data + (b * p.H + h) * p.T);
    });
    ctx->save_for_backward({qkv, cos, sin, sink_logit, sink_key, sink_value, out, lse});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &qkv = saved[0], &sink_logit = saved[3], &sink_key = saved[4], &sink_value = saved[5],
                        &out = saved[6], &lse = saved[7];
    const Problem p(qkv, saved[1], saved[2], sink_logit, sink_key, sink_value);
    const auto dout = grads[0].contiguous();
    auto dqkv = torch::empty_like(qkv);
    std::vector<double> dsink(p.B * p.H, 0.0), dkey(p.B * p.H * p.D, 0.0), dvalue(p.B * p.H * p.D, 0.0);
    const float* dout_data = dout.data_ptr<float>();
    const float* out_data = out.data_ptr<float>();
    const float* lse_data = lse.data_ptr<float>();
    float* dqkv_data = dqkv.data_ptr<float>();
    for_each_head(p, [&](int64_t b, int64_t h, Panels& w) {
      const int64_t task = b * p.H + h;
      dsink[task] = backward_task(p, b, h, w, dout_data, out_data, lse_data + task * p.T, dqkv_data,
                                  &dkey[task * p.D], &dvalue[task * p.D]);
    });
    auto per_head = [&](const std::vector<double>& per_task, const torch::Tensor& like) {
      if (like.numel() == 0) return torch::Tensor();
      const int64_t width = static_cast<int64_t>(per_task.size()) / (p.B * p.H);
      std::vector<double> sum(p.H * width, 0.0);
      for (int64_t i = 0; i < p.B * p.H; ++i)  // a fixed order: deterministic
        for (int64_t d = 0; d < width; ++d) sum[(i % p.H) * width + d] += per_task[i * width + d];
      return torch::tensor(sum, torch::kFloat64).to(torch::kFloat32).view(like.sizes());
    };
    return {dqkv,        torch::Tensor(),           torch::Tensor(), per_head(dsink, sink_logit),
            per_head(dkey, sink_key), per_head(dvalue, sink_value)};
  }
};

}  // namespace

bool packed_qkv_attention_applies(const torch::Tensor& qkv) {
  return cpu_has_avx512f() && qkv.device().is_cpu() && qkv.scalar_type() == torch::kFloat32 && qkv.dim() == 4 &&
         qkv.size(3) % (3 * kLanes) == 0 && qkv.size(3) > 0 && qkv.is_contiguous();
}

torch::Tensor packed_qkv_attention(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                                   const SinkColumn& sink) {
  SINKLM_ASSERT(packed_qkv_attention_applies(qkv), "packed_qkv_attention: qkv must be [B, T, H, 3D] float32 CPU");
  const int64_t T = qkv.size(1), H = qkv.size(2), D = qkv.size(3) / 3;
  SINKLM_ASSERT(cos.sizes() == sin.sizes() && cos.size(-2) == T && (cos.dim() == 2 || cos.size(0) == qkv.size(0)),
                "cos/sin must be [T, R] or [B, T, R]");
  SINKLM_ASSERT(cos.size(-1) % 2 == 0 && cos.size(-1) <= D, "rotary dims must be even and <= D");
  SINKLM_ASSERT(sink.softmax(), "the fused kernel computes softmax; a mode with its own normaliser takes the reference path");
  SINKLM_ASSERT(!sink.present() || (sink.logit.dim() == 1 && sink.heads() == H), "sink logit must be [H]");
  for (const auto* t : {&sink.key, &sink.value})
    SINKLM_ASSERT(!t->defined() || (sink.present() && t->sizes() == torch::IntArrayRef({H, D})),
                  "sink key/value must be [H, D], with a logit");
  auto f32 = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat32).contiguous() : torch::empty({0}); };
  return PackedQkvAttentionFunction::apply(qkv, f32(cos), f32(sin), f32(sink.logit), f32(sink.key), f32(sink.value));
}

}  // namespace sinklm
