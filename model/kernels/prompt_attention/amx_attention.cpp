#include "model/kernels/prompt_attention/amx_attention.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/system/cpu_features.h"
#include "model/kernels/avx512_math.h"

namespace sinklm {
namespace {

using c10::BFloat16;
constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
constexpr int64_t kTileRows = 16;  // rows of every tile, and the query rows of a block
constexpr int64_t kKeyStep = 32;   // keys per step: two score tiles, the inner size of one value product
constexpr int64_t kMaxHead = 64;
constexpr float kLog2e = 1.44269504088896341f;

// One run's queries, positions and state as pointers and element strides, the shapes checked (keys and values
// are packed per head from their tensors).
struct Run {
  const BFloat16* q;
  int64_t q_head, q_row;
  const int64_t* positions;
  int64_t H, T, N, D;
  float *max, *sum, *out;  // the state: [H, T], [H, T], [H, T, D] contiguous
};

Run run_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& positions,
           const OnlineSoftmax& state) {
  SINKLM_ASSERT(q.dim() == 3 && k.dim() == 3 && k.sizes() == v.sizes() && k.size(0) == q.size(0) &&
                    k.size(2) == q.size(2),
                "amx attention: queries [H, T, D], keys and values [H, N, D]");
  for (const auto* t : {&q, &k, &v})
    SINKLM_ASSERT(t->scalar_type() == torch::kBFloat16 && t->device().is_cpu() &&
                      (t->stride(2) == 1 || (t == &k && t->stride(1) == 1)),
                  "amx attention: bf16 on the CPU, rows contiguous (keys: or columns): ", t->sizes(), " strides ",
                  t->strides());
  SINKLM_ASSERT(positions.scalar_type() == torch::kInt64 && positions.is_contiguous() &&
                    positions.numel() == k.size(1),
                "amx attention: positions [N] int64");
  const int64_t H = q.size(0), T = q.size(1), D = q.size(2);
  for (const auto* t : {&state.max, &state.sum, &state.out})
    SINKLM_ASSERT(t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->size(0) == H && t->size(1) == T,
                  "online softmax state must be float32 [H, T(, D)] contiguous");
  return {q.data_ptr<BFloat16>(), q.stride(0), q.stride(1), positions.data_ptr<int64_t>(), H, T, k.size(1), D, state.max.data_ptr<float>(),
          state.sum.data_ptr<float>(), state.out.data_ptr<float>()};
}

// The tiles and the transposes read rows: queries or values stored otherwise are copied (never the case in a cache).
torch::Tensor row_major(const torch::Tensor& t) { return t.stride(2) == 1 ? t : t.contiguous(); }

// Slots up to the last that holds a key (position >= 0).
int64_t held_prefix(const torch::Tensor& positions) {
  SINKLM_ASSERT(positions.scalar_type() == torch::kInt64 && positions.is_contiguous(), "amx attention: positions [N] int64");
  const int64_t* p = positions.data_ptr<int64_t>();
  int64_t n = positions.numel();
  while (n > 0 && p[n - 1] < 0) --n;
  return n;
}

// The positions of a step of kKeyStep keys, computed once per run: whether each of its slots holds a key
// (the run may end inside it), and the least and greatest held position. Most steps of a long prompt are seen
// whole by every row of a block, or by none, which spares them the per-key masks.
struct StepRange {
  bool all_held = true, any_held = false;
  int64_t least = 0, greatest = 0;
};

std::vector<StepRange> step_ranges(const int64_t* positions, int64_t N) {
  std::vector<StepRange> steps((N + kKeyStep - 1) / kKeyStep);
  for (int64_t j = 0; j < N; ++j) {
    StepRange& r = steps[j / kKeyStep];
    const int64_t p = positions[j];
    if (p < 0) {
      r.all_held = false;
      continue;
    }
    r.least = r.any_held ? std::min(r.least, p) : p;
    r.greatest = r.any_held ? std::max(r.greatest, p) : p;
    r.any_held = true;
  }
  if (N % kKeyStep) steps.back().all_held = false;
  return steps;
}

// Whether no row of a block (stream positions t0 .. t_last) sees a key of the step, or every row sees all.
bool seen_by_none(const StepRange& r, int64_t t0, int64_t t_last, const WindowVisibility& v) {
  return !r.any_held || r.least > t_last || (r.least >= v.sinks && r.greatest + v.recent <= t0);
}
bool seen_whole(const StepRange& r, int64_t t0, int64_t t_last, const WindowVisibility& v) {
  return r.all_held && r.greatest <= t0 && (r.greatest < v.sinks || t_last < r.least + v.recent);
}

// The rows of a block (query i at stream position t0 + i, `valid` the rows the chunk has) that see the key at
// position p: WindowVisibility::sees as an interval of rows, p <= t and (p < sinks or t < p + recent).
uint32_t rows_seeing(int64_t p, int64_t t0, uint32_t valid, const WindowVisibility& v) {
  if (p < 0) return 0;
  const int64_t lo = std::max<int64_t>(0, p - t0);
  const int64_t hi = p < v.sinks ? kTileRows : std::min<int64_t>(kTileRows, p + v.recent - t0);
  if (lo >= hi) return 0;
  return valid & ((1u << hi) - 1) & ~((1u << lo) - 1);
}

// Every tile is 16 rows of 64 bytes. Tiles 0-1: the block's queries (B operand of the scores, dims 0-31 and
// 32-63), then values (A); 2: keys, then values (A operands); 3: scores (C), then probabilities (B); 4-7:
// outputs (C), 16 dims each. The layout is ldtilecfg's 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// A thread's buffers between the tiles and the vector registers, 11 KiB (L1).
struct alignas(64) Scratch {
  uint32_t q[kMaxHead / 2][kTileRows];  // queries, bf16 pairs: [dim pair][row] (B operand)
  float s[2][kKeyStep][kTileRows];      // scores, transposed: [key][row], this step's and the next's
  uint32_t p[kKeyStep / 2][kTileRows];  // probabilities, bf16 pairs: [key pair][row] (B operand)
  float o[kMaxHead][kTileRows];         // outputs, transposed: [dim][row]
};

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")

// GCC's tileloadd has no memory clobber: without the barrier a store to the buffer could sink below the load.
#define SINKLM_TILE_LOAD(tile, base, stride) \
  do {                                       \
    asm volatile("" ::: "memory");           \
    _tile_loadd(tile, base, stride);         \
  } while (0)

void load_tile_config() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int i = 0; i < 8; ++i) c.colsb[i] = 64, c.rows[i] = kTileRows;
    return c;
  }();
  _tile_loadconfig(&config);
}

template <int D>
void load_output_tiles(Scratch& w) {
  SINKLM_TILE_LOAD(4, &w.o[0][0], 64);
  SINKLM_TILE_LOAD(5, &w.o[16][0], 64);
  if constexpr (D == 64) {
    SINKLM_TILE_LOAD(6, &w.o[32][0], 64);
    SINKLM_TILE_LOAD(7, &w.o[48][0], 64);
  }
}

template <int D>
void store_output_tiles(Scratch& w) {
  _tile_stored(4, &w.o[0][0], 64);
  _tile_stored(5, &w.o[16][0], 64);
  if constexpr (D == 64) {
    _tile_stored(6, &w.o[32][0], 64);
    _tile_stored(7, &w.o[48][0], 64);
  }
}

// Scores of keys k0 .. k0 + 31 (kp: the head's keys, [Np][D]) against the block's rows, into s ([key][row]).
template <int D>
void score_tiles(const BFloat16* kp, int64_t k0, float (*s)[kTileRows]) {
  for (int64_t j = 0; j < 2; ++j) {
    const BFloat16* k = kp + (k0 + j * kTileRows) * D;
    _tile_zero(3);
    SINKLM_TILE_LOAD(2, k, D * 2);
    _tile_dpbf16ps(3, 2, 0);
    if constexpr (D == 64) {
      SINKLM_TILE_LOAD(2, k + 32, D * 2);
      _tile_dpbf16ps(3, 2, 1);
    }
    _tile_stored(3, &s[j * kTileRows][0], 64);
  }
}

// A 16 x 16 transpose of 32-bit elements in registers (rows in, columns out): pairs of rows interleaved by
// 32 bits, then by 64, then 128-bit lanes twice.
void transpose16x16(__m512i* r) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // r[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd);
    t[8 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
    r[4 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xdd);
  }
}

// dst[c][r] = src[r][c] for r < R and c < C (src rows src_stride apart). dst is laid out in blocks of 32 r:
// element (c, r) at dst + c · dst_stride + (r / 32) · dst_block + r % 32, each block row written in full (zeros
// past R). Pairs of source rows become 32-bit elements (row 2i in the low half), and 16 pairs x 16 columns are
// transposed in registers.
void transpose_bf16(const BFloat16* src, int64_t R, int64_t src_stride, int64_t C, BFloat16* dst, int64_t dst_stride,
                    int64_t dst_block) {
  for (int64_t r0 = 0; r0 < R; r0 += 32)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      const __mmask16 columns = lane_mask(C - c0);
      const auto row = [&](int64_t r) {
        return r < R ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(columns, src + r * src_stride + c0))
                     : _mm512_setzero_si512();
      };
      __m512i x[16];
      for (int64_t i = 0; i < 16; ++i)
        x[i] = _mm512_or_si512(row(r0 + 2 * i), _mm512_slli_epi32(row(r0 + 2 * i + 1), 16));
      transpose16x16(x);
      for (int64_t j = 0; j < std::min<int64_t>(16, C - c0); ++j)
        _mm512_storeu_si512(dst + (c0 + j) * dst_stride + r0 / 32 * dst_block, x[j]);
    }
}

// keys[h] → [Np][D] row-major, zero rows past N: the A operand of the score product, a tile 16 keys by 32
// dims. A cache stores its keys [D, N] (the decode kernels read them so): transposed here, per head, into L2.
void pack_keys(const torch::Tensor& keys, int64_t h, int64_t Np, BFloat16* out) {
  const int64_t N = keys.size(1), D = keys.size(2);
  const BFloat16* k = keys.data_ptr<BFloat16>() + h * keys.stride(0);
  if (keys.stride(2) == 1) {
    for (int64_t n = 0; n < N; ++n) std::memcpy(out + n * D, k + n * keys.stride(1), D * sizeof(BFloat16));
  } else {
    SINKLM_ASSERT(keys.stride(1) == 1, "amx attention: keys [H, N, D] with rows or columns contiguous");
    transpose_bf16(k, D, keys.stride(2), N, out, D, 32);
  }
  std::memset(static_cast<void*>(out + N * D), 0, (Np - N) * D * sizeof(BFloat16));
}

// values[h] [N, D] → [Np / 32][D][32], zeros past N: per step of 32 keys, the A operands of the value product
// (tiles of 16 dims by 32 keys) each 1 KiB contiguous. Rows Np apart ([D][Np]) would put a tile's 16 rows in one
// L1 set at Np = 4,096 (8 KiB apart), evicting each other.
void pack_values(const torch::Tensor& values, int64_t h, BFloat16* out) {
  const int64_t D = values.size(2);
  transpose_bf16(values.data_ptr<BFloat16>() + h * values.stride(0), values.size(1), values.stride(1), D, out, 32,
                 32 * D);
}

// Raises the reference maximum of every row to the block's (`top`): sums and the outputs in the tiles rescaled.
template <int D>
__m512 raise_maximum(__m512 m, __m512 top, __m512& sum, Scratch& w) {
  const __m512 raised = _mm512_max_ps(m, top);
  // exp_ps is 0 below -87: a row's first visible key (m = -inf) and a row with nothing yet (-inf - -inf) give
  // 0, where sum and out are 0.
  const __m512 alpha = exp_ps(_mm512_sub_ps(m, raised));
  sum = _mm512_mul_ps(sum, alpha);
  store_output_tiles<D>(w);
  for (int d = 0; d < D; ++d) _mm512_store_ps(w.o[d], _mm512_mul_ps(_mm512_load_ps(w.o[d]), alpha));
  load_output_tiles<D>(w);
  return raised;
}

// exp(scale · s − m) of the visible scores, added to the rows' sums and written to w.p as bf16 pairs; computed
// as 2^(scale2 · s − m2) with scale2 = scale · log2(e) and m2 = m · log2(e), one FMA into exp2_ps_coarse.
__m512 probabilities(const float (*s)[kTileRows], const uint16_t* masks, __m512 scale2, __m512 m2, Scratch& w) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __m512 added = _mm512_setzero_ps();
  for (int64_t i = 0; i < kKeyStep / 2; ++i) {
    const __mmask16 even = masks[2 * i], odd = masks[2 * i + 1];
    if (!(even | odd)) {
      _mm512_store_si512(w.p[i], _mm512_setzero_si512());
      continue;
    }
    const __m512 p0 = exp2_ps_coarse(_mm512_fmsub_ps(_mm512_load_ps(s[2 * i]), scale2, m2), even);
    const __m512 p1 = exp2_ps_coarse(_mm512_fmsub_ps(_mm512_load_ps(s[2 * i + 1]), scale2, m2), odd);
    added = _mm512_add_ps(added, _mm512_add_ps(p0, p1));
    // [p0 rows 0-15 | p1 rows 0-15] as bf16 (round to nearest even) → pairs (p0[r], p1[r]) by row
    const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
    _mm512_store_si512(w.p[i], _mm512_permutexvar_epi16(interleave, halves));
  }
  return added;
}

// out (tiles 4-7) += probabilities (w.p) · values of keys k0 .. k0 + 31 (vt: the head's packed values,
// pack_values). The value tiles go to tiles 0-2 in turn (the queries are reloaded for the next scores): a tile
// is not renamed, so a load into the tile a product still reads waits for it.
template <int D>
void value_product(const BFloat16* vt, int64_t k0, Scratch& w) {
  const BFloat16* step = vt + k0 * D;  // [D][32]
  SINKLM_TILE_LOAD(3, &w.p[0][0], 64);
  SINKLM_TILE_LOAD(0, step, 64);
  SINKLM_TILE_LOAD(1, step + 16 * 32, 64);
  if constexpr (D == 64) SINKLM_TILE_LOAD(2, step + 32 * 32, 64);
  _tile_dpbf16ps(4, 0, 3);
  _tile_dpbf16ps(5, 1, 3);
  if constexpr (D == 64) {
    SINKLM_TILE_LOAD(0, step + 48 * 32, 64);
    _tile_dpbf16ps(6, 2, 3);
    _tile_dpbf16ps(7, 0, 3);
  }
}

template <int D>
void load_query_tiles(const Scratch& w) {
  SINKLM_TILE_LOAD(0, &w.q[0][0], 64);
  if constexpr (D == 64) SINKLM_TILE_LOAD(1, &w.q[16][0], 64);
}

// A step of kKeyStep keys some row of a block sees, with the rows that see each key.
struct Step {
  int64_t k0 = 0;
  uint16_t masks[kKeyStep];
};

// The first step from key `from` on that a row of the block (rows `valid` at stream positions t0 ..) sees.
bool next_step(const Run& run, const StepRange* ranges, int64_t from, int64_t t0, uint32_t valid,
               const WindowVisibility& vis, Step& step) {
  const int64_t t_last = t0 + __builtin_popcount(valid) - 1;
  for (int64_t k0 = from; k0 < run.N; k0 += kKeyStep) {
    const StepRange& range = ranges[k0 / kKeyStep];
    if (seen_by_none(range, t0, t_last, vis)) continue;
    step.k0 = k0;
    if (seen_whole(range, t0, t_last, vis)) {
      std::fill(step.masks, step.masks + kKeyStep, static_cast<uint16_t>(valid));
      return true;
    }
    uint32_t any = 0;
    for (int64_t r = 0; r < kKeyStep; ++r)
      any |= step.masks[r] = k0 + r < run.N ? rows_seeing(run.positions[k0 + r], t0, valid, vis) : 0;
    if (any) return true;
  }
  return false;
}

// The largest visible raw score of each row (four running maxima: one would be a chain of 32 latencies).
__m512 step_maximum(const float (*s)[kTileRows], const uint16_t* masks) {
  __m512 top[4];
  for (int a = 0; a < 4; ++a) top[a] = _mm512_set1_ps(kMinusInfinity);
  for (int64_t r = 0; r < kKeyStep; ++r) top[r % 4] = _mm512_mask_max_ps(top[r % 4], masks[r], top[r % 4], _mm512_load_ps(s[r]));
  return _mm512_max_ps(_mm512_max_ps(top[0], top[1]), _mm512_max_ps(top[2], top[3]));
}

// One head's 16 query rows from q0 over the whole run. Software-pipelined: the next step's score product is
// issued before this step's softmax, so the tiles compute it while the vector units take the exponentials.
template <int D>
void fold_query_block(const Run& run, const StepRange* ranges, const BFloat16* kp, const BFloat16* vt,
                      int64_t h, int64_t q0, const WindowVisibility& vis, float scale, Scratch& w) {
  const int64_t rows = std::min(kTileRows, run.T - q0);
  const uint32_t valid = (1u << rows) - 1;
  const BFloat16* q = run.q + h * run.q_head + q0 * run.q_row;
  for (int64_t r = 0; r < D / 2; ++r)
    for (int64_t i = 0; i < kTileRows; ++i) {
      w.q[r][i] = 0;
      if (i < rows) std::memcpy(&w.q[r][i], q + i * run.q_row + 2 * r, 4);
    }

  float* out = run.out + (h * run.T + q0) * D;
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = 0; i < kTileRows; ++i) w.o[d][i] = i < rows ? out[i * D + d] : 0.0f;
  load_output_tiles<D>(w);
  const __mmask16 lanes = static_cast<__mmask16>(valid);
  __m512 m = _mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInfinity), lanes, run.max + h * run.T + q0);
  __m512 sum = _mm512_maskz_loadu_ps(lanes, run.sum + h * run.T + q0);

  const int64_t t0 = vis.first_query + q0;
  const __m512 scale_v = _mm512_set1_ps(scale), lazy = _mm512_set1_ps(kLazyRescale), log2e = _mm512_set1_ps(kLog2e);
  const __m512 scale2 = _mm512_mul_ps(scale_v, log2e);
  Step steps[2];
  int now = 0;
  bool have = next_step(run, ranges, 0, t0, valid, vis, steps[0]);
  if (have) {
    load_query_tiles<D>(w);
    score_tiles<D>(kp, steps[0].k0, w.s[0]);
  }
  while (have) {
    const Step& step = steps[now];
    const bool more = next_step(run, ranges, step.k0 + kKeyStep, t0, valid, vis, steps[now ^ 1]);
    if (more) {
      load_query_tiles<D>(w);
      score_tiles<D>(kp, steps[now ^ 1].k0, w.s[now ^ 1]);
    }
    const __m512 top = _mm512_mul_ps(step_maximum(w.s[now], step.masks), scale_v);  // scale > 0 keeps the order
    if (_mm512_cmp_ps_mask(top, _mm512_add_ps(m, lazy), _CMP_GT_OQ)) m = raise_maximum<D>(m, top, sum, w);
    sum = _mm512_add_ps(sum, probabilities(w.s[now], step.masks, scale2, _mm512_mul_ps(m, log2e), w));
    value_product<D>(vt, step.k0, w);
    now ^= 1;
    have = more;
  }

  store_output_tiles<D>(w);
  asm volatile("" ::: "memory");
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < D; ++d) out[i * D + d] = w.o[d][i];
  _mm512_mask_storeu_ps(run.max + h * run.T + q0, lanes, m);
  _mm512_mask_storeu_ps(run.sum + h * run.T + q0, lanes, sum);
}

#undef SINKLM_TILE_LOAD

// Every head in parallel: its keys and values packed into the thread's buffer (pack_keys, pack_values: 2 x [Np, D],
// 1 MiB at 4,096 keys, stay in L2 for its blocks of rows), then each block of 16 rows. Each thread loads the
// tile configuration for itself (oneDNN loads its own between our calls) and releases the tiles after.
template <int D>
void fold_run(const Run& run, const torch::Tensor& keys, const torch::Tensor& values, const WindowVisibility& vis,
              float scale) {
  const int64_t Np = (run.N + kKeyStep - 1) / kKeyStep * kKeyStep;
  const auto ranges = step_ranges(run.positions, run.N);
  const int64_t blocks = (run.T + kTileRows - 1) / kTileRows;
  at::parallel_for(0, run.H, 1, [&](int64_t begin, int64_t end) {
    thread_local Scratch w;
    // Kept between calls, never initialised: no allocation or zero fill per layer and chunk.
    thread_local std::unique_ptr<BFloat16[]> packed;
    thread_local int64_t capacity = 0;
    if (capacity < 2 * D * Np) packed.reset(new BFloat16[capacity = 2 * D * Np]);
    BFloat16 *kp = packed.get(), *vt = kp + D * Np;
    load_tile_config();
    for (int64_t h = begin; h < end; ++h) {
      pack_keys(keys, h, Np, kp);
      pack_values(values, h, vt);
      for (int64_t b = 0; b < blocks; ++b)
        fold_query_block<D>(run, ranges.data(), kp, vt, h, b * kTileRows, vis, scale, w);
    }
    _tile_release();
  });
}

#pragma GCC pop_options

}  // namespace

bool amx_attention_applies(const torch::Tensor& queries) {
  return cpu_has_amx_bf16() && queries.device().is_cpu() && queries.scalar_type() == torch::kBFloat16 &&
         queries.dim() == 3 && (queries.size(2) == 32 || queries.size(2) == 64);
}

void amx_attention_fold(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                        const torch::Tensor& positions, const WindowVisibility& visibility, float scale,
                        OnlineSoftmax& state) {
  SINKLM_ASSERT(amx_attention_applies(queries), "amx_attention_fold needs an AMX-BF16 CPU, bf16, D of 32 or 64");
  if (keys.numel() == 0 || queries.numel() == 0) return;  // an empty run (no sinks yet) may have any strides
  // Slots past the last held one (a ring that has not filled yet) are seen by no row: neither packed nor read.
  const int64_t held = held_prefix(positions);
  if (held == 0) return;
  const auto k = keys.narrow(1, 0, held), v = row_major(values.narrow(1, 0, held)), q = row_major(queries);
  const auto p = positions.narrow(0, 0, held);
  const Run run = run_of(q, k, v, p, state);
  if (run.D == 64) fold_run<64>(run, k, v, visibility, scale);
  else fold_run<32>(run, k, v, visibility, scale);
}

void amx_attention_fold_reference(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                                  const torch::Tensor& positions, const WindowVisibility& visibility, float scale,
                                  OnlineSoftmax& state) {
  if (keys.numel() == 0 || queries.numel() == 0) return;
  const auto q_rows = row_major(queries), k_rows = row_major(keys), v_rows = row_major(values);  // alive: run points in
  const Run run = run_of(q_rows, k_rows, v_rows, positions, state);
  const BFloat16* v = v_rows.data_ptr<BFloat16>();
  const BFloat16* keys_at = k_rows.data_ptr<BFloat16>();
  std::vector<float> x(run.N);
  for (int64_t h = 0; h < run.H; ++h)
    for (int64_t i = 0; i < run.T; ++i) {
      const int64_t t = visibility.first_query + i, row = h * run.T + i;
      const BFloat16* q = run.q + h * run.q_head + i * run.q_row;
      float m = run.max[row];
      for (int64_t j = 0; j < run.N; ++j) {
        if (!visibility.sees(t, run.positions[j])) continue;
        const BFloat16* k = keys_at + h * k_rows.stride(0) + j * k_rows.stride(1);
        float s = 0;
        for (int64_t d = 0; d < run.D; ++d) s += static_cast<float>(q[d]) * static_cast<float>(k[d]);
        x[j] = scale * s;
        m = std::max(m, x[j]);
      }
      if (m == kMinusInfinity) continue;
      const float alpha = std::exp(run.max[row] - m);
      float* out = run.out + row * run.D;
      run.sum[row] *= alpha;
      for (int64_t d = 0; d < run.D; ++d) out[d] *= alpha;
      for (int64_t j = 0; j < run.N; ++j) {
        if (!visibility.sees(t, run.positions[j])) continue;
        const float p = std::exp(x[j] - m);
        run.sum[row] += p;
        const float rounded = static_cast<float>(BFloat16(p));
        const BFloat16* vj = v + h * v_rows.stride(0) + j * v_rows.stride(1);
        for (int64_t d = 0; d < run.D; ++d) out[d] += rounded * static_cast<float>(vj[d]);
      }
      run.max[row] = m;
    }
}

}  // namespace sinklm
