#include "model/projection.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

#include <optional>

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

torch::Tensor ProjectionImpl::forward_in_product_dtype(const torch::Tensor& x, Activation activation) {
  const bool gelu = activation == Activation::Gelu;
  const bool bf16_product = weight.scalar_type() == torch::kBFloat16 && !packed_copy_serves(x) &&
                            bf16_product_dtype(x.device()) == torch::kBFloat16;
  if (!bf16_product) return gelu ? torch::gelu(forward(x)) : forward(x);
  const auto xb = x.to(torch::kBFloat16);
  const auto b = bias.defined() ? std::optional<torch::Tensor>(bias.to(torch::kBFloat16)) : std::nullopt;
  if (!x.device().is_cpu()) {
    auto y = torch::linear(xb, weight, b);  // [..., out] bf16
    return gelu ? torch::gelu(y) : y;
  }
  // oneDNN's linear with the bias and the GELU (erf, as torch::gelu) as post-ops, LibTorch's own op for it.
  using Signature = torch::Tensor(const torch::Tensor&, const torch::Tensor&, const std::optional<torch::Tensor>&,
                                  c10::string_view, c10::List<std::optional<c10::Scalar>>, std::optional<c10::string_view>);
  static const auto linear_pointwise =
      c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_linear_pointwise", "").typed<Signature>();
  const std::optional<c10::string_view> algorithm = gelu ? std::optional<c10::string_view>("none") : std::nullopt;
  return linear_pointwise.call(xb, weight, b, gelu ? "gelu" : "none", c10::List<std::optional<c10::Scalar>>(),
                               algorithm);  // [..., out] bf16
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
