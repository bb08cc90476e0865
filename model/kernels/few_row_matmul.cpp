#include "model/kernels/few_row_matmul.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/system/cpu_features.h"
#include "core/error.h"
#include "model/kernels/avx2_math.h"
#include "model/kernels/avx512_math.h"

namespace sinklm {
namespace {

constexpr int64_t kPanel = 16;       // output columns per panel: one AVX-512 register (two AVX2 ones) of float32 or int32
constexpr int64_t kPanelBytes = 64;  // one k group of one panel: 16 columns x G elements
constexpr int64_t kPrefetchSteps = 32;  // 2 KiB ahead per panel stream: DRAM latency at the rate a 16-row tile reads
constexpr int64_t kInt8BlockGroups = kInt8Block / 4;  // k groups per int8 block (model/io/weight_format.h)

// Per-column operands from the first column of a panel on (null where absent).
struct ColumnData {
  const float* bias;   // [N]
  const float* scale;  // int8: the panels' block scales [panels, blocks, 16]
  int64_t blocks;      // int8: blocks per column
};

// Per-row operands of one tile (int8; null otherwise), laid out [blocks, m] like the units: the activations'
// block scales a[m, b] and each block's excess 128 Σ_{k in b} xq[m, k] (AVX-512 stores the weights q + 128).
struct RowData {
  const float* block_scale;
  const int32_t* block_excess;
};

ColumnData column_data(const ColumnData& c, int64_t first) {
  return {c.bias ? c.bias + first : nullptr, c.scale ? c.scale + first * c.blocks : nullptr, c.blocks};
}

// A format's arithmetic, per instruction set: `Unit` holds one row's activations for one k group (G values),
// load() reads a 64-byte k group of a panel, `Acc` holds 16 column sums. start() gives the sums before the first
// product, flush() closes an int8 block, store() writes the 16 outputs. kRows: rows per tile.
#include "model/kernels/few_row_avx512.inc"
#include "model/kernels/few_row_avx2.inc"
#include "model/kernels/few_row_amx.inc"

uint32_t bf16_bits(float v) { return c10::BFloat16(v).x; }  // round to nearest even, as Tensor.to(bf16)
float bf16_value(float v) { return static_cast<float>(c10::BFloat16(v)); }

// The q8 activations of one row: xq = round(x / a[b]) per block b of 32 k, a[b] = max_{k in b} |x| / 127
// (1 for an all-zero block), as quantize_int8 computes them. Writes the units to out[g * m] and a[b] and the
// block's excess 128 Σ_{k in b} xq to block_scale[b * row_step] and block_excess[b * row_step].
void int8_row_units_avx512(const float* x, int64_t K, int64_t Kg, int64_t m, uint32_t* out, float* block_scale,
                           int32_t* block_excess, int64_t row_step);

void int8_row_units(const float* x, int64_t stride, int64_t K, int64_t Kg, int64_t m, uint32_t* out,
                    float* block_scale, int32_t* block_excess, int64_t row_step) {
  if (stride == 1 && cpu_has_avx512_vnni())
    return int8_row_units_avx512(x, K, Kg, m, out, block_scale, block_excess, row_step);
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
    block_scale[b * row_step] = a;
    block_excess[b * row_step] = 128 * sum;
  }
}

// The same for a contiguous row in AVX-512 (a block's 32 values in two registers): the same IEEE division and
// rounding to nearest even, so the same units, scales and sums to the bit. A 16-stream decode step spent 3% of
// its time in the scalar loop.
__attribute__((target("avx512f,avx512bw"))) void int8_row_units_avx512(const float* x, int64_t K, int64_t Kg,
                                                                       int64_t m, uint32_t* out, float* block_scale,
                                                                       int32_t* block_excess, int64_t row_step) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (int64_t b = 0; b * kInt8Block < K; ++b) {
    const int64_t begin = b * kInt8Block, end = std::min(K, begin + kInt8Block);
    const __m512 lo = _mm512_maskz_loadu_ps(lane_mask(end - begin), x + begin);  // 0 past the row's end
    const __m512 hi = _mm512_maskz_loadu_ps(lane_mask(end - begin - kLanes), x + begin + kLanes);
    const float largest = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const float a = largest > 0.0f ? largest / 127.0f : 1.0f;
    const __m512 divisor = _mm512_set1_ps(a);
    const __m512i q_lo = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_div_ps(lo, divisor), kRound));
    const __m512i q_hi = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_div_ps(hi, divisor), kRound));
    alignas(16) uint32_t units[kInt8BlockGroups];  // 32 xq, the lowest k in the low byte of the first unit
    _mm_store_si128(reinterpret_cast<__m128i*>(units), _mm512_cvtepi32_epi8(q_lo));
    _mm_store_si128(reinterpret_cast<__m128i*>(units + 4), _mm512_cvtepi32_epi8(q_hi));
    for (int64_t g = begin / 4; g < std::min(Kg, (end + 3) / 4); ++g) out[g * m] = units[g - begin / 4];
    block_scale[b * row_step] = a;
    block_excess[b * row_step] = 128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
  }
}

// Row `x` ([K] float32, element stride `stride`) as Kg units of format F into out[g * m] (one column of a
// tile's [Kg, m] block); int8 also writes its RowData at block_scale and block_excess.
template <class F>
void row_units(const float* x, int64_t stride, int64_t K, int64_t Kg, int64_t m, typename F::Unit* out,
               float* block_scale, int32_t* block_excess) {
  if constexpr (F::format == WeightFormat::Fp32) {
    for (int64_t k = 0; k < K; ++k) out[k * m] = x[k * stride];
  } else if constexpr (std::is_same_v<typename F::Unit, avx2::Bf16Pair>) {
    for (int64_t g = 0; g < Kg; ++g) {
      const int64_t k = 2 * g;
      out[g * m] = {bf16_value(x[k * stride]), k + 1 < K ? bf16_value(x[(k + 1) * stride]) : 0.0f};
    }
  } else if constexpr (F::format == WeightFormat::Bf16) {
    for (int64_t g = 0; g < Kg; ++g) {
      const int64_t k = 2 * g;
      out[g * m] = bf16_bits(x[k * stride]) | (k + 1 < K ? bf16_bits(x[(k + 1) * stride]) << 16 : 0u);
    }
  } else {
    int8_row_units(x, stride, K, Kg, m, out, block_scale, block_excess, m);
  }
}

// Panels [first, last) of one row tile: an instruction set's tile_panels<F> (model/kernels/few_row_tile.inc).
template <class F>
using TilePanelsFn = void (*)(const typename F::Unit*, const RowData&, int64_t, int64_t, const uint8_t*,
                              const ColumnData&, float*, int64_t, int64_t, int64_t);

// x [M, K] times the packed weight into y ([M, N] rows of a contiguous tensor), M > 0.
template <class F>
void matmul_in(const torch::Tensor& x, const PackedWeight& w, const torch::Tensor& bias, TilePanelsFn<F> tile_panels,
               const torch::Tensor& y) {
  const int64_t M = x.size(0), K = w.K, N = w.N, Kg = (K + F::G - 1) / F::G, panels = w.panels.size(0);
  const int64_t blocks = (K + kInt8Block - 1) / kInt8Block;
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
      tile_panels(xt.data() + row * Kg, rows, std::min<int64_t>(F::kRows, M - row), Kg, panel_data, columns,
                  y_data + row * N, N, first, last);
    }
  });
}

// int8 on AMX tiles (model/kernels/few_row_amx.inc), M a multiple of 16 and K of 32, into y as matmul_in: the
// rows as tiles of 16, each [16, Kg] units row-major with its RowData [blocks, 16].
void matmul_amx(const torch::Tensor& x, const PackedWeight& w, const torch::Tensor& bias, const torch::Tensor& y) {
  const int64_t M = x.size(0), K = w.K, N = w.N, Kg = K / 4, blocks = K / kInt8Block;
  SINKLM_ASSERT(K % kInt8Block == 0 && M > 0 && M % amx::kRows == 0, "AMX int8 product of K ", K, ", M ", M);
  const auto b = bias.defined() ? bias.contiguous() : bias;
  std::vector<uint32_t> xq(static_cast<size_t>(M * Kg));
  std::vector<float> block_scale(static_cast<size_t>(M * blocks));
  std::vector<int32_t> block_excess(block_scale.size());
  const float* x_data = x.data_ptr<float>();
  for (int64_t row = 0; row < M; ++row) {
    const int64_t data = (row / amx::kRows) * amx::kRows * blocks + row % amx::kRows;  // [tile][blocks][16]
    int8_row_units(x_data + row * x.stride(0), x.stride(1), K, Kg, 1, xq.data() + row * Kg, block_scale.data() + data,
                   block_excess.data() + data, amx::kRows);
  }
  const ColumnData columns{b.defined() ? b.data_ptr<float>() : nullptr, w.scale.data_ptr<float>(), blocks};
  amx::run_tiles(reinterpret_cast<const int8_t*>(xq.data()), Kg * 4, block_scale.data(), block_excess.data(), M, Kg,
                 blocks, static_cast<const uint8_t*>(w.panels.data_ptr()), w.panels.size(0), columns,
                 y.data_ptr<float>(), N);
}

// few_row_matmul_in's product in an AVX-512 or AVX2 set, into y as matmul_in.
void product_into(InstructionSet set, const torch::Tensor& x, const PackedWeight& packed, const torch::Tensor& bias,
                  const torch::Tensor& y) {
  const bool wide = set == InstructionSet::Avx512;
  switch (packed.format) {
    case WeightFormat::Fp32: return matmul_in<avx512::Fp32Format>(x, packed, bias, &avx512::tile_panels<avx512::Fp32Format>, y);
    case WeightFormat::Bf16:
      return wide ? matmul_in<avx512::Bf16Format>(x, packed, bias, &avx512::tile_panels<avx512::Bf16Format>, y)
                  : matmul_in<avx2::Bf16Format>(x, packed, bias, &avx2::tile_panels<avx2::Bf16Format>, y);
    case WeightFormat::Int8:
      return wide ? matmul_in<avx512::Int8Format>(x, packed, bias, &avx512::tile_panels<avx512::Int8Format>, y)
                  : matmul_in<avx2::Int8Format>(x, packed, bias, &avx2::tile_panels<avx2::Int8Format>, y);
  }
  SINKLM_ASSERT(false, "weight format");
}

int64_t group_of(WeightFormat format) {
  switch (format) {  // the same in every instruction set: one packed layout serves them all
    case WeightFormat::Fp32: return avx512::Fp32Format::G;
    case WeightFormat::Bf16: return avx512::Bf16Format::G;
    case WeightFormat::Int8: return avx512::Int8Format::G;
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

// Whether this CPU runs the kernel for `format` in `set`: no allocation, since every decode projection asks.
bool runs_in(WeightFormat format, InstructionSet set) {
  if (set == InstructionSet::Amx) return format == WeightFormat::Int8 && cpu_has_amx_int8();
  if (set == InstructionSet::Avx2) return format != WeightFormat::Fp32 && cpu_has_avx2_fma();
  return format == WeightFormat::Fp32   ? cpu_has_avx512f()
         : format == WeightFormat::Bf16 ? cpu_has_avx512_bf16()
                                        : cpu_has_avx512_vnni();
}

}  // namespace

int64_t PackedWeight::bytes() const {
  int64_t total = panels.nbytes();
  return total + (scale.defined() ? static_cast<int64_t>(scale.nbytes()) : 0);
}

std::vector<InstructionSet> few_row_kernel_sets(WeightFormat format) {
  std::vector<InstructionSet> sets;
  for (InstructionSet set : {InstructionSet::Amx, InstructionSet::Avx512, InstructionSet::Avx2})
    if (runs_in(format, set)) sets.push_back(set);
  return sets;
}

bool few_row_kernel_available(WeightFormat format) {
  return runs_in(format, InstructionSet::Avx512) || runs_in(format, InstructionSet::Avx2);  // AMX implies AVX-512
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
  const InstructionSet set = runs_in(packed.format, InstructionSet::Amx)      ? InstructionSet::Amx
                             : runs_in(packed.format, InstructionSet::Avx512) ? InstructionSet::Avx512
                                                                              : InstructionSet::Avx2;
  return few_row_matmul_in(set, x, packed, bias);
}

torch::Tensor few_row_matmul_in(InstructionSet set, const torch::Tensor& x, const PackedWeight& packed,
                                const torch::Tensor& bias) {
  SINKLM_ASSERT(runs_in(packed.format, set), "few_row_matmul in ", weight_format_name(packed.format), " with ",
                instruction_set_name(set), ", which this CPU or kernel lacks");
  SINKLM_ASSERT(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.size(1) == packed.K &&
                    (!bias.defined() || (bias.numel() == packed.N && bias.scalar_type() == torch::kFloat32)),
                "x ", x.sizes(), ", packed [", packed.N, ", ", packed.K, "]");
  const int64_t M = x.size(0);
  auto y = torch::empty({M, packed.N}, x.options());
  if (M == 0) return y;
  int64_t done = 0;
  if (set == InstructionSet::Amx) {  // whole tiles of 16 rows on AMX, the rows left over in AVX-512
    if (packed.K % kInt8Block == 0) done = M / amx::kRows * amx::kRows;
    if (done > 0) matmul_amx(x.narrow(0, 0, done), packed, bias, y.narrow(0, 0, done));
    set = InstructionSet::Avx512;
  }
  if (done < M) product_into(set, x.narrow(0, done, M - done), packed, bias, y.narrow(0, done, M - done));
  return y;
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
