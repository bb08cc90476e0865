#include "model/kernels/few_row_matmul.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "model/kernels/avx512_math.h"

// Every tile is compiled for the union of the formats' instruction sets; few_row_kernel_available says which
// of them the CPU has before any tile of that format runs (the fp32 tiles use AVX-512F instructions only).
#define SINKLM_FEW_ROW_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni")))

namespace sinklm {
namespace {

constexpr int64_t kPanel = kLanes;  // output columns per panel: one AVX-512 register of float32 or int32
constexpr int64_t kPanelBytes = 64;  // one k group of one panel: 16 columns x G elements
constexpr int64_t kPrefetchSteps = 32;  // 2 KiB ahead per panel stream: DRAM latency at the rate a 16-row tile reads
constexpr int64_t kInt8BlockGroups = kInt8Block / 4;  // k groups per int8 block (model/weight_format.h)

// Per-column operands from the first column of a panel on (null where absent).
struct ColumnData {
  const float* bias;   // [N]
  const float* scale;  // int8: the panels' block scales [panels, blocks, 16]
  int64_t blocks;      // int8: blocks per column
};

// Per-row operands of one tile (int8; null otherwise), laid out [blocks, m] like the units: the activations'
// block scales a[m, b] and each block's excess 128 Σ_{k in b} xq[m, k] (the weights are stored q + 128).
struct RowData {
  const float* block_scale;
  const int32_t* block_excess;
};

// A format's arithmetic: `Unit` holds one row's activations for one k group (G values), `W` a 64-byte weight
// load, `Acc` 16 column sums. start() gives the sums before the first product, flush() closes an int8 block,
// finish() turns the sums into the 16 outputs. kRows: rows per tile, kAccRegisters: registers per Acc.
struct Fp32Format {
  static constexpr int64_t G = 1;
  static constexpr int kRows = 16, kAccRegisters = 1;
  static constexpr WeightFormat format = WeightFormat::Fp32;
  using Unit = float;
  using Acc = __m512;
  SINKLM_FEW_ROW_TARGET static Acc start(const ColumnData& c, __mmask16 m) {
    return c.bias ? _mm512_maskz_loadu_ps(m, c.bias) : _mm512_setzero_ps();
  }
  SINKLM_FEW_ROW_TARGET static __m512 load(const void* w) { return _mm512_loadu_ps(w); }
  SINKLM_FEW_ROW_TARGET static Acc madd(Acc acc, Unit x, __m512 w) { return _mm512_fmadd_ps(_mm512_set1_ps(x), w, acc); }
  SINKLM_FEW_ROW_TARGET static __m512 finish(Acc acc, const ColumnData&, __mmask16) { return acc; }
};

struct Bf16Format {
  static constexpr int64_t G = 2;
  static constexpr int kRows = 16, kAccRegisters = 1;
  static constexpr WeightFormat format = WeightFormat::Bf16;
  using Unit = uint32_t;  // two bf16, the lower k in the low half
  using Acc = __m512;
  SINKLM_FEW_ROW_TARGET static Acc start(const ColumnData& c, __mmask16 m) { return Fp32Format::start(c, m); }
  SINKLM_FEW_ROW_TARGET static __m512i load(const void* w) { return _mm512_loadu_si512(w); }
  SINKLM_FEW_ROW_TARGET static Acc madd(Acc acc, Unit x, __m512i w) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(x)), (__m512bh)w);
  }
  SINKLM_FEW_ROW_TARGET static __m512 finish(Acc acc, const ColumnData&, __mmask16) { return acc; }
};

// int8: the weights are stored u = q + 128 (vpdpbusd multiplies unsigned by signed bytes), the activations
// signed, so a block's Σ_k u xq exceeds Σ_k q xq by 128 Σ_k xq, which depends on the row only (RowData).
struct Int8Format {
  static constexpr int64_t G = 4;
  static constexpr int kRows = 8, kAccRegisters = 2;  // an int32 block sum and a float32 total per column
  static constexpr WeightFormat format = WeightFormat::Int8;
  using Unit = uint32_t;  // four int8 xq, the lowest k in the low byte
  struct Acc {
    __m512i block;  // Σ u xq over the current block
    __m512 total;   // Σ over finished blocks of a[m, b] scale[n, b] (block - excess)
  };
  SINKLM_FEW_ROW_TARGET static Acc start(const ColumnData&, __mmask16) { return {_mm512_setzero_si512(), _mm512_setzero_ps()}; }
  SINKLM_FEW_ROW_TARGET static __m512i load(const void* w) { return _mm512_loadu_si512(w); }
  SINKLM_FEW_ROW_TARGET static Acc madd(Acc acc, Unit x, __m512i w) {
    return {_mm512_dpbusd_epi32(acc.block, w, _mm512_set1_epi32(static_cast<int>(x))), acc.total};
  }
  // scale: the block's 16 column scales.
  SINKLM_FEW_ROW_TARGET static Acc flush(Acc acc, float block_scale, int32_t excess, __m512 scale) {
    const __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc.block, _mm512_set1_epi32(excess)));  // exact int32
    return {_mm512_setzero_si512(), _mm512_fmadd_ps(sum, _mm512_mul_ps(_mm512_set1_ps(block_scale), scale), acc.total)};
  }
  SINKLM_FEW_ROW_TARGET static __m512 finish(Acc acc, const ColumnData& c, __mmask16 m) {
    return c.bias ? _mm512_add_ps(acc.total, _mm512_maskz_loadu_ps(m, c.bias)) : acc.total;
  }
};

// Panels a tile of M rows computes together: enough independent accumulators (M * P >= 8) to hide the
// multiply-add latency when M is small, without running out of registers (M * P * registers <= 16).
constexpr int panels_per_group(int M, int registers) {
  const int n = M * registers;
  return n <= 2 ? 8 : n <= 4 ? 4 : n <= 8 ? 2 : 1;
}

ColumnData column_data(const ColumnData& c, int64_t first) {
  return {c.bias ? c.bias + first : nullptr, c.scale ? c.scale + first * c.blocks : nullptr, c.blocks};
}

// One tile: rows xt ([Kg, M] units, the tile's rows transposed so that a step over k groups reads M
// consecutive units; int8: their RowData) times P consecutive panels starting at w, into y (row stride
// ldy). Only the first `columns` outputs of the group are read and stored (the last panel may be partial).
template <class F, int M, int P>
SINKLM_FEW_ROW_TARGET void tile(const typename F::Unit* xt, const RowData& rows, int64_t Kg, const uint8_t* w,
                                const ColumnData& c, float* y, int64_t ldy, int64_t columns) {
  typename F::Acc acc[M][P];
  for (int p = 0; p < P; ++p) {
    const auto first = F::start(column_data(c, p * kPanel), lane_mask(columns - p * kPanel));
    for (int r = 0; r < M; ++r) acc[r][p] = first;
  }
  for (int64_t k = 0; k < Kg; ++k) {
    decltype(F::load(w)) wk[P];
    for (int p = 0; p < P; ++p) {
      const uint8_t* at = w + (p * Kg + k) * kPanelBytes;
      // The weights come from DRAM (the KV caches stream through the caches in between), and the hardware
      // prefetcher does not run far enough ahead of P streams: ask for the line kPrefetchSteps k ahead.
      _mm_prefetch(reinterpret_cast<const char*>(at + kPrefetchSteps * kPanelBytes), _MM_HINT_T0);
      wk[p] = F::load(at);
    }
    for (int r = 0; r < M; ++r)
      for (int p = 0; p < P; ++p) acc[r][p] = F::madd(acc[r][p], xt[k * M + r], wk[p]);
    if constexpr (F::format == WeightFormat::Int8) {
      if ((k + 1) % kInt8BlockGroups == 0 || k + 1 == Kg) {
        const int64_t b = k / kInt8BlockGroups;
        const float* a = rows.block_scale + b * M;
        const int32_t* excess = rows.block_excess + b * M;
        for (int p = 0; p < P; ++p) {
          const __m512 scale = _mm512_loadu_ps(c.scale + (p * kPanel * c.blocks) + b * kPanel);
          for (int r = 0; r < M; ++r) acc[r][p] = F::flush(acc[r][p], a[r], excess[r], scale);
        }
      }
    }
  }
  for (int p = 0; p < P && columns > p * kPanel; ++p) {
    const __mmask16 mask = lane_mask(columns - p * kPanel);
    const ColumnData at = column_data(c, p * kPanel);
    for (int r = 0; r < M; ++r)
      _mm512_mask_storeu_ps(y + r * ldy + p * kPanel, mask, F::finish(acc[r][p], at, mask));
  }
}

template <class F>
using TileFn = void (*)(const typename F::Unit*, const RowData&, int64_t, const uint8_t*, const ColumnData&, float*,
                        int64_t, int64_t);

template <class F>
struct TileKernels {
  TileFn<F> group;   // panels_per_group(M) panels
  TileFn<F> single;  // one panel (the remainder)
};

template <class F, size_t... I>
constexpr std::array<TileKernels<F>, sizeof...(I)> kernel_table(std::index_sequence<I...>) {
  return {TileKernels<F>{&tile<F, static_cast<int>(I) + 1, panels_per_group(static_cast<int>(I) + 1, F::kAccRegisters)>,
                         &tile<F, static_cast<int>(I) + 1, 1>}...};
}

template <class F>
constexpr auto kKernels = kernel_table<F>(std::make_index_sequence<F::kRows>());  // [M - 1]

// Panels [first, last) for one tile of m rows.
template <class F>
void tile_panels(const typename F::Unit* xt, const RowData& rows, int64_t m, int64_t Kg, const uint8_t* panels,
                 const ColumnData& c, float* y, int64_t N, int64_t first, int64_t last) {
  const TileKernels<F>& fn = kKernels<F>[m - 1];
  const int64_t P = panels_per_group(static_cast<int>(m), F::kAccRegisters);
  for (int64_t p = first; p < last;) {
    const bool group = last - p >= P;
    const int64_t columns = std::min(N - p * kPanel, (group ? P : 1) * kPanel);
    (group ? fn.group : fn.single)(xt, rows, Kg, panels + p * Kg * kPanelBytes, column_data(c, p * kPanel),
                                   y + p * kPanel, N, columns);
    p += group ? P : 1;
  }
}

uint32_t bf16_bits(float v) { return c10::BFloat16(v).x; }  // round to nearest even, as Tensor.to(bf16)

// The q8 activations of one row: xq = round(x / a[b]) per block b of 32 k, a[b] = max_{k in b} |x| / 127
// (1 for an all-zero block), as quantize_int8 computes them. Writes the units to out[g * m] and a[b] and the
// block's excess 128 Σ_{k in b} xq to block_scale[b * m] and block_excess[b * m].
void int8_row_units(const float* x, int64_t stride, int64_t K, int64_t Kg, int64_t m, uint32_t* out,
                    float* block_scale, int32_t* block_excess) {
  for (int64_t b = 0; b * kInt8Block < K; ++b) {
    const int64_t begin = b * kInt8Block, end = std::min(K, begin + kInt8Block);
    float largest = 0.0f;
    for (int64_t k = begin; k < end; ++k) largest = std::max(largest, std::fabs(x[k * stride]));
    const float a = largest > 0.0f ? largest / 127.0f : 1.0f;
    int32_t sum = 0;
    for (int64_t g = begin / 4; g < std::min(Kg, (end + 3) / 4); ++g) {
      uint32_t unit = 0;
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t k = 4 * g + i;
        // |x| <= 127 a, so the rounded quotient is in [-127, 127] (ties to even, as torch.round).
        const int q = k < end ? static_cast<int>(std::nearbyint(x[k * stride] / a)) : 0;
        sum += q;
        unit |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(q))) << (8 * i);
      }
      out[g * m] = unit;
    }
    block_scale[b * m] = a;
    block_excess[b * m] = 128 * sum;
  }
}

// Row `x` ([K] float32, element stride `stride`) as Kg units of format F into out[g * m] (one column of a
// tile's [Kg, m] block); int8 also writes its RowData at block_scale and block_excess.
template <class F>
void row_units(const float* x, int64_t stride, int64_t K, int64_t Kg, int64_t m, typename F::Unit* out,
               float* block_scale, int32_t* block_excess) {
  if constexpr (F::format == WeightFormat::Fp32) {
    for (int64_t k = 0; k < K; ++k) out[k * m] = x[k * stride];
  } else if constexpr (F::format == WeightFormat::Bf16) {
    for (int64_t g = 0; g < Kg; ++g) {
      const int64_t k = 2 * g;
      out[g * m] = bf16_bits(x[k * stride]) | (k + 1 < K ? bf16_bits(x[(k + 1) * stride]) << 16 : 0u);
    }
  } else {
    int8_row_units(x, stride, K, Kg, m, out, block_scale, block_excess);
  }
}

template <class F>
torch::Tensor matmul_in(const torch::Tensor& x, const PackedWeight& w, const torch::Tensor& bias) {
  const int64_t M = x.size(0), K = w.K, N = w.N, Kg = (K + F::G - 1) / F::G, panels = w.panels.size(0);
  const int64_t blocks = (K + kInt8Block - 1) / kInt8Block;
  auto y = torch::empty({M, N}, x.options());
  if (M == 0) return y;
  const auto b = bias.defined() ? bias.contiguous() : bias;
  // Row tiles of up to F::kRows, each as [Kg, m] units (tile t at offset t * kRows * Kg), and int8's row data
  // ([blocks, m] at t * kRows * blocks).
  const bool int8 = F::format == WeightFormat::Int8;
  std::vector<typename F::Unit> xt(static_cast<size_t>(M * Kg));
  std::vector<float> block_scale(int8 ? static_cast<size_t>(M * blocks) : 0);
  std::vector<int32_t> block_excess(block_scale.size());
  const float* x_data = x.data_ptr<float>();
  for (int64_t row = 0; row < M; row += F::kRows) {
    const int64_t m = std::min<int64_t>(F::kRows, M - row);
    for (int64_t r = 0; r < m; ++r)
      row_units<F>(x_data + (row + r) * x.stride(0), x.stride(1), K, Kg, m, xt.data() + row * Kg + r,
                   int8 ? block_scale.data() + row * blocks + r : nullptr, int8 ? block_excess.data() + row * blocks + r : nullptr);
  }
  const ColumnData columns{b.defined() ? b.data_ptr<float>() : nullptr,
                           w.scale.defined() ? w.scale.data_ptr<float>() : nullptr, blocks};
  const auto* panel_data = static_cast<const uint8_t*>(w.panels.data_ptr());
  float* y_data = y.data_ptr<float>();
  // Each thread takes a run of panels (a multiple of 8, so groups stay whole) for every row tile.
  at::parallel_for(0, (panels + 7) / 8, 1, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * 8, last = std::min(end * 8, panels);
    for (int64_t row = 0; row < M; row += F::kRows) {
      const RowData rows{int8 ? block_scale.data() + row * blocks : nullptr, int8 ? block_excess.data() + row * blocks : nullptr};
      tile_panels<F>(xt.data() + row * Kg, rows, std::min<int64_t>(F::kRows, M - row), Kg, panel_data, columns,
                     y_data + row * N, N, first, last);
    }
  });
  return y;
}

int64_t group_of(WeightFormat format) {
  switch (format) {
    case WeightFormat::Fp32: return Fp32Format::G;
    case WeightFormat::Bf16: return Bf16Format::G;
    case WeightFormat::Int8: return Int8Format::G;
  }
  SINKLM_ASSERT(false, "weight format ", static_cast<int>(format));
}

// [N, K] -> [ceil(N / 16), ceil(K / G), 16, G], zero-padded.
torch::Tensor panel_layout(const torch::Tensor& weight, int64_t G) {
  const int64_t N = weight.size(0), K = weight.size(1), panels = (N + kPanel - 1) / kPanel, Kg = (K + G - 1) / G;
  auto padded = torch::zeros({panels * kPanel, Kg * G}, weight.options());
  padded.narrow(0, 0, N).narrow(1, 0, K).copy_(weight);
  return padded.view({panels, kPanel, Kg, G}).permute({0, 2, 1, 3}).contiguous();
}

}  // namespace

int64_t PackedWeight::bytes() const {
  int64_t total = panels.nbytes();
  return total + (scale.defined() ? static_cast<int64_t>(scale.nbytes()) : 0);
}

bool few_row_kernel_available(WeightFormat format) {
  switch (format) {
    case WeightFormat::Fp32: return cpu_has_avx512f();
    case WeightFormat::Bf16: return cpu_has_avx512_bf16();
    case WeightFormat::Int8: return cpu_has_avx512_vnni();
  }
  return false;
}

PackedWeight pack_few_row_weight(const torch::Tensor& weight, WeightFormat format) {
  SINKLM_ASSERT(weight.dim() == 2 && weight.device().is_cpu() && weight.is_floating_point(), "weight ", weight.sizes(),
                " ", weight.scalar_type());
  torch::NoGradGuard no_grad;
  PackedWeight packed{format, weight.size(0), weight.size(1)};
  const int64_t G = group_of(format);
  if (format == WeightFormat::Int8) {
    const Int8Weight w = quantize_int8(weight);
    packed.panels = panel_layout((w.q.to(torch::kInt16) + 128).to(torch::kUInt8), G);  // u = q + 128
    packed.scale = panel_layout(w.scale, 1).squeeze(3);  // [panels, blocks, 16]
  } else {
    packed.panels = panel_layout(weight.to(format == WeightFormat::Bf16 ? torch::kBFloat16 : torch::kFloat32), G);
  }
  return packed;
}

torch::Tensor few_row_matmul(const torch::Tensor& x, const PackedWeight& packed, const torch::Tensor& bias) {
  SINKLM_ASSERT(few_row_kernel_available(packed.format), "few_row_matmul in ", weight_format_name(packed.format),
                " on a CPU without its instructions");
  SINKLM_ASSERT(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.size(1) == packed.K &&
                    (!bias.defined() || (bias.numel() == packed.N && bias.scalar_type() == torch::kFloat32)),
                "x ", x.sizes(), ", packed [", packed.N, ", ", packed.K, "]");
  switch (packed.format) {
    case WeightFormat::Fp32: return matmul_in<Fp32Format>(x, packed, bias);
    case WeightFormat::Bf16: return matmul_in<Bf16Format>(x, packed, bias);
    case WeightFormat::Int8: return matmul_in<Int8Format>(x, packed, bias);
  }
  SINKLM_ASSERT(false, "weight format");
}

torch::Tensor few_row_matmul_reference(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       WeightFormat format) {
  torch::NoGradGuard no_grad;
  const auto f64 = torch::kFloat64;
  torch::Tensor xr = x.to(f64), wr = weight.to(f64);
  if (format == WeightFormat::Bf16) {
    xr = x.to(torch::kBFloat16).to(f64);
    wr = weight.to(torch::kBFloat16).to(f64);
  } else if (format == WeightFormat::Int8) {
    xr = dequantize_int8(quantize_int8(x)).to(f64);  // the activations' blocks are the weights' blocks along K
    wr = dequantize_int8(quantize_int8(weight)).to(f64);
  }
  auto y = torch::matmul(xr, wr.t());  // [M, N]
  return bias.defined() ? y + bias.to(f64) : y;
}

}  // namespace sinklm
