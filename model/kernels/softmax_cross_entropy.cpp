#include "model/kernels/softmax_cross_entropy.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <vector>

#include "model/kernels/avx512_math.h"
#include "core/system/cpu_features.h"
#include "core/error.h"

namespace sinklm {
namespace {

// row[j] = exp(row[j] - lse) for j < V: the softmax, given the log-normaliser.
__attribute__((target("avx512f"))) void write_softmax(float* row, int64_t V, float lse) {
  const __m512 shift = _mm512_set1_ps(lse);
  for (int64_t j = 0; j < V; j += 16) {
    const __mmask16 mask = lane_mask(V - j);
    _mm512_mask_storeu_ps(row + j, mask, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + j), shift)));
  }
}

}  // namespace

bool softmax_cross_entropy_applies(const torch::Tensor& logits) {
  return cpu_has_avx512f() && logits.device().is_cpu() && logits.scalar_type() == torch::kFloat32 &&
         logits.dim() == 2 && logits.is_contiguous();
}

double softmax_cross_entropy(torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& keep,
                             bool write_gradient) {
  SINKLM_ASSERT(softmax_cross_entropy_applies(logits), "logits must be [r, V] float32 contiguous on an AVX-512 CPU");
  RECORD_FUNCTION("sinklm::softmax_cross_entropy", std::vector<c10::IValue>());  // a row of train.trace_steps
  const int64_t rows = logits.size(0), V = logits.size(1);
  const auto t = target.to(torch::kInt64).contiguous();
  const auto k = keep.to(torch::kFloat32).contiguous();
  SINKLM_ASSERT(t.numel() == rows && k.numel() == rows, "target and keep must be [r]");
  float* x = logits.data_ptr<float>();
  const int64_t* targets = t.data_ptr<int64_t>();
  const float* kept = k.data_ptr<float>();
  std::vector<double> losses(rows);
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = x + i * V;
      SINKLM_ASSERT(targets[i] >= 0 && targets[i] < V, "target out of range");
      const float m = max_of(row, V);
      const float lse = m + std::log(sum_exp(row, V, m));  // [0, V): row i's log-normaliser
      losses[i] = kept[i] * (double(lse) - row[targets[i]]);
      if (!write_gradient) continue;
      write_softmax(row, V, lse);
      row[targets[i]] -= kept[i];
    }
  });
  double total = 0;
  for (double loss : losses) total += loss;  // row order: the same sum on any number of threads
  return total;
}

}  // namespace sinklm
