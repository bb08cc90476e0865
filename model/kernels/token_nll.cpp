#include "model/kernels/token_nll.h"

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

}  // namespace

torch::Tensor token_nll(const torch::Tensor& logits, const std::vector<int64_t>& targets) {
  SINKLM_ASSERT(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(targets.size()), "logits [T, V] and T targets");
  const int64_t T = logits.size(0), V = logits.size(1);
  for (int64_t t : targets) SINKLM_ASSERT(t >= 0 && t < V, "target ", t, " outside [0, ", V, ")");
  if (!kernel_applies(logits)) {
    auto index = torch::tensor(targets, torch::kInt64).to(logits.device()).unsqueeze(1);  // [T, 1]
    return (-torch::log_softmax(logits.to(torch::kFloat32), -1).gather(1, index)).squeeze(1).cpu().contiguous();
  }
  auto nll = torch::empty({T}, torch::kFloat32);
  const float* x = logits.data_ptr<float>();
  float* out = nll.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = x + i * V;
      const float m = max_of(row, V);
      out[i] = (m + std::log(sum_exp(row, V, m))) - row[targets[i]];  // log-normaliser - the target's logit
    }
  });
  return nll;
}

}  // namespace sinklm
