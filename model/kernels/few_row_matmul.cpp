#include "model/kernels/few_row_matmul.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <array>

#include "model/kernels/avx512_math.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace sinklm {
namespace {

constexpr int64_t kPanel = kLanes;  // output columns per panel: one AVX-512 register of float32
constexpr int kMaxRows = 16;    // rows per tile: 16 accumulators, half the register file
constexpr int64_t kPrefetchSteps = 32;  // 2 KiB ahead per panel stream: DRAM latency at the rate a 16-row tile reads

// Panels a tile of M rows computes together: enough independent accumulators (M * P >= 8) to hide the
// multiply-add latency when M is small, without running out of registers (M * P <= 16).
constexpr int panels_per_group(int M) { return M <= 2 ? 8 : M <= 4 ? 4 : M <= 8 ? 2 : 1; }

// One tile: rows xt ([K, M], the tile's rows transposed so that a step over k reads M consecutive floats)
// times P consecutive panels starting at w, plus bias (its first `columns` values, or null), into y (row
// stride ldy). Only the first `columns` outputs of the group are read and stored (the last panel of a matrix
// may be partial).
template <int M, int P>
__attribute__((target("avx512f"))) void tile(const float* xt, int64_t K, const float* w, const float* bias, float* y,
                                             int64_t ldy, int64_t columns) {
  __m512 acc[M][P];
  for (int p = 0; p < P; ++p) {
    const __m512 b = bias ? _mm512_maskz_loadu_ps(lane_mask(columns - p * kPanel), bias + p * kPanel) : _mm512_setzero_ps();
    for (int r = 0; r < M; ++r) acc[r][p] = b;
  }
  for (int64_t k = 0; k < K; ++k) {
    __m512 wk[P];
    for (int p = 0; p < P; ++p) {
      const float* at = w + (p * K + k) * kPanel;
      // The weights come from DRAM (the KV caches stream through the caches in between), and the hardware
      // prefetcher does not run far enough ahead of P streams: ask for the line kPrefetchSteps k ahead.
      _mm_prefetch(reinterpret_cast<const char*>(at + kPrefetchSteps * kPanel), _MM_HINT_T0);
      wk[p] = _mm512_loadu_ps(at);
    }
    for (int r = 0; r < M; ++r) {
      const __m512 xr = _mm512_set1_ps(xt[k * M + r]);
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(xr, wk[p], acc[r][p]);
    }
  }
  for (int p = 0; p < P && columns > p * kPanel; ++p)
    for (int r = 0; r < M; ++r) _mm512_mask_storeu_ps(y + r * ldy + p * kPanel, lane_mask(columns - p * kPanel), acc[r][p]);
}

using TileFn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t);

struct TileKernels {
  TileFn group;   // panels_per_group(M) panels
  TileFn single;  // one panel (the remainder)
};

template <int M>
constexpr TileKernels kernels_for() {
  return {&tile<M, panels_per_group(M)>, &tile<M, 1>};
}

template <size_t... I>
constexpr std::array<TileKernels, sizeof...(I)> kernel_table(std::index_sequence<I...>) {
  return {kernels_for<static_cast<int>(I) + 1>()...};
}

constexpr auto kKernels = kernel_table(std::make_index_sequence<kMaxRows>());  // [M - 1]

// Panels [first, last) for one tile of m rows.
void tile_panels(const float* xt, int64_t m, int64_t K, const float* packed, const float* bias, float* y, int64_t N,
                 int64_t first, int64_t last) {
  const TileKernels& fn = kKernels[m - 1];
  const int64_t P = panels_per_group(static_cast<int>(m));
  for (int64_t p = first; p < last;) {
    const bool group = last - p >= P;
    const int64_t columns = std::min(N - p * kPanel, (group ? P : 1) * kPanel);
    (group ? fn.group : fn.single)(xt, K, packed + p * K * kPanel, bias ? bias + p * kPanel : nullptr, y + p * kPanel,
                                   N, columns);
    p += group ? P : 1;
  }
}

}  // namespace

torch::Tensor pack_few_row_weight(const torch::Tensor& weight) {
  SINKLM_ASSERT(weight.dim() == 2 && weight.device().is_cpu() && weight.scalar_type() == torch::kFloat32,
                "weight ", weight.sizes(), " ", weight.scalar_type());
  const int64_t N = weight.size(0), K = weight.size(1), panels = (N + kPanel - 1) / kPanel;
  auto padded = torch::zeros({panels * kPanel, K}, weight.options());
  padded.narrow(0, 0, N).copy_(weight);
  return padded.view({panels, kPanel, K}).transpose(1, 2).contiguous();  // [panels, K, 16]
}

torch::Tensor few_row_matmul(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& bias, int64_t N) {
  SINKLM_ASSERT(cpu_has_avx512f(), "few_row_matmul on a CPU without AVX-512F");
  SINKLM_ASSERT(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && packed.size(1) == x.size(1) &&
                    packed.size(0) == (N + kPanel - 1) / kPanel && (!bias.defined() || bias.numel() == N),
                "x ", x.sizes(), ", packed ", packed.sizes(), ", N ", N);
  const int64_t M = x.size(0), K = x.size(1), panels = packed.size(0);
  auto y = torch::empty({M, N}, x.options());
  if (M == 0) return y;
  const auto b_contiguous = bias.defined() ? bias.contiguous() : bias;
  // Row tiles of up to 16, each transposed to [K, m] (tile t at offset t * 16 * K).
  auto xt = torch::empty({M * K}, x.options());
  for (int64_t row = 0; row < M; row += kMaxRows) {
    const int64_t m = std::min<int64_t>(kMaxRows, M - row);
    torch::from_blob(xt.data_ptr<float>() + row * K, {K, m}, x.options()).copy_(x.narrow(0, row, m).t());
  }
  const float* xt_data = xt.data_ptr<float>();
  const float* w = packed.data_ptr<float>();
  const float* b = b_contiguous.defined() ? b_contiguous.data_ptr<float>() : nullptr;
  float* y_data = y.data_ptr<float>();
  // Each thread takes a run of panels (a multiple of 8, so groups stay whole) for every row tile.
  at::parallel_for(0, (panels + 7) / 8, 1, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * 8, last = std::min(end * 8, panels);
    for (int64_t row = 0; row < M; row += kMaxRows)
      tile_panels(xt_data + row * K, std::min<int64_t>(kMaxRows, M - row), K, w, b, y_data + row * N, N, first, last);
  });
  return y;
}

}  // namespace sinklm
