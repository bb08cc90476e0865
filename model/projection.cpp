#include "model/projection.h"

#include <torch/torch.h>

#include "core/cpu_features.h"
#include "model/kernels/few_row_matmul.h"

namespace sinklm {

bool ProjectionImpl::packed_copy_serves(const torch::Tensor& x) const {
  const bool current = packed_.defined() && weight.data_ptr() == packed_from_ &&
                       static_cast<int64_t>(weight._version()) == packed_version_;
  const bool wants_gradient = torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  return current && !wants_gradient && x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         x.numel() <= kFewRows * x.size(-1);
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x) {
  if (!packed_copy_serves(x)) return LinearImpl::forward(x);
  const int64_t out = weight.size(0);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  return few_row_matmul(x.reshape({-1, x.size(-1)}), packed_, bias, out).view(shape);  // [..., out]
}

bool ProjectionImpl::pack_for_few_rows() {
  packed_ = torch::Tensor();
  if (!cpu_has_avx512f() || !weight.device().is_cpu() || weight.scalar_type() != torch::kFloat32) return false;
  torch::NoGradGuard no_grad;
  packed_ = pack_few_row_weight(weight);
  packed_from_ = weight.data_ptr();
  packed_version_ = static_cast<int64_t>(weight._version());
  return true;
}

}  // namespace sinklm
