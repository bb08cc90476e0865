#include "model/projection.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

bool ProjectionImpl::packed_copy_serves(const torch::Tensor& x) const {
  const bool current = packed_.panels.defined() && weight.data_ptr() == packed_from_ &&
                       static_cast<int64_t>(weight._version()) == packed_version_;
  const bool wants_gradient = torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  return current && !wants_gradient && x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         x.numel() <= kFewRows * x.size(-1);
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x) {
  if (packed_copy_serves(x)) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = packed_.N;
    return few_row_matmul(x.reshape({-1, x.size(-1)}), packed_, bias).view(shape);  // [..., out]
  }
  if (weight.scalar_type() == torch::kBFloat16 && x.scalar_type() == torch::kFloat32) {
    const auto dt = bf16_product_dtype(x.device());  // x rounded to bf16 either way
    auto y = torch::linear(x.to(torch::kBFloat16).to(dt), weight.to(dt)).to(torch::kFloat32);  // [..., out]
    return bias.defined() ? y + bias : y;
  }
  return LinearImpl::forward(x);
}

void ProjectionImpl::set_weight_format(WeightFormat format) {
  SINKLM_ASSERT(format_ == WeightFormat::Fp32 && weight.scalar_type() == torch::kFloat32,
                "set_weight_format on a ", weight_format_name(format_), " weight");
  torch::NoGradGuard no_grad;
  packed_ = PackedWeight();
  if (format == WeightFormat::Bf16) weight.set_data(weight.to(torch::kBFloat16));
  if (format == WeightFormat::Int8) weight.copy_(dequantize_int8(quantize_int8(weight)));
  weight.set_requires_grad(false);
  format_ = format;
}

bool ProjectionImpl::pack_for_few_rows() {
  packed_ = PackedWeight();
  const auto held = format_ == WeightFormat::Bf16 ? torch::kBFloat16 : torch::kFloat32;
  if (!few_row_kernel_available(format_) || !weight.device().is_cpu() || weight.scalar_type() != held) return false;
  torch::NoGradGuard no_grad;
  packed_ = pack_few_row_weight(weight, format_);
  packed_from_ = weight.data_ptr();
  packed_version_ = static_cast<int64_t>(weight._version());
  return true;
}

int64_t ProjectionImpl::few_row_bytes() const {
  const int64_t bias_bytes = bias.defined() ? bias.nbytes() : 0;
  return (packed_.panels.defined() ? packed_.bytes() : weight.nbytes()) + bias_bytes;
}

}  // namespace sinklm
