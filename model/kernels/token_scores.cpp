#include "model/kernels/token_scores.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>

#include "model/kernels/avx512_math.h"
#include "core/system/cpu_features.h"
#include "core/error.h"

namespace sinklm {
namespace {

bool kernel_applies(const torch::Tensor& logits) {
  return cpu_has_avx512f() && logits.device().is_cpu() && logits.scalar_type() == torch::kFloat32 &&
         logits.dim() == 2 && logits.is_contiguous();
}

// The first j in [0, n) with x[j] == m, m = max_of(x, n), or x[j] NaN (max_of skips some NaNs: a row holding
// one gets the first NaN or maximum, torch.argmax the first NaN; its NLL is meaningless either way).
__attribute__((target("avx512f"))) int64_t first_index_of(const float* x, int64_t n, float m) {
  const __m512 target = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 mask = lane_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + j);
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(mask, v, target, _CMP_EQ_OQ) | _mm512_mask_cmp_ps_mask(mask, v, v, _CMP_UNORD_Q);
    if (hit) return j + __builtin_ctz(static_cast<unsigned>(hit));
  }
  SINKLM_ASSERT(false, "a row's maximum ", m, " not found in it");
  return 0;
}

TokenScores reference_scores(const torch::Tensor& logits, const std::vector<int64_t>& targets) {
  auto index = torch::tensor(targets, torch::kInt64).to(logits.device()).unsqueeze(1);  // [T, 1]
  auto nll = (-torch::log_softmax(logits.to(torch::kFloat32), -1).gather(1, index)).squeeze(1);
  return {nll.cpu().contiguous(), logits.argmax(1).cpu().contiguous()};
}

}  // namespace

TokenScores token_scores(const torch::Tensor& logits, const std::vector<int64_t>& targets) {
  SINKLM_ASSERT(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(targets.size()), "logits [T, V] and T targets");
  const int64_t T = logits.size(0), V = logits.size(1);
  for (int64_t t : targets) SINKLM_ASSERT(t >= 0 && t < V, "target ", t, " outside [0, ", V, ")");
  if (!kernel_applies(logits)) return reference_scores(logits, targets);
  TokenScores scores{torch::empty({T}, torch::kFloat32), torch::empty({T}, torch::kInt64)};
  const float* x = logits.data_ptr<float>();
  float* nll = scores.nll.data_ptr<float>();
  int64_t* top1 = scores.top1.data_ptr<int64_t>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = x + i * V;
      const float m = max_of(row, V);
      top1[i] = first_index_of(row, V, m);
      nll[i] = (m + std::log(sum_exp(row, V, m))) - row[targets[i]];  // log-normaliser - the target's logit
    }
  });
  return scores;
}

int64_t top_token(const torch::Tensor& logits) {
  const auto row = logits.reshape({1, -1});  // a view of a contiguous row
  if (!kernel_applies(row)) return row.argmax(1).item<int64_t>();
  const float* x = row.data_ptr<float>();
  const int64_t V = row.size(1);
  SINKLM_ASSERT(V > 0, "an empty row of logits");
  return first_index_of(x, V, max_of(x, V));
}

}  // namespace sinklm
