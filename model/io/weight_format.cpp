#include "model/io/weight_format.h"

#include <torch/torch.h>

#include "core/system/cpu_features.h"
#include "core/error.h"

namespace sinklm {

std::string weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::Fp32: return "fp32";
    case WeightFormat::Bf16: return "bf16";
    case WeightFormat::Int8: return "int8";
  }
  SINKLM_ASSERT(false, "weight format ", static_cast<int>(format));
}

WeightFormat parse_weight_format(const std::string& name, const std::string& what) {
  for (WeightFormat f : {WeightFormat::Fp32, WeightFormat::Bf16, WeightFormat::Int8})
    if (weight_format_name(f) == name) return f;
  fail(what, ": unknown weight format '", name, "' (expected fp32, bf16 or int8)");
}

Int8Weight quantize_int8(const torch::Tensor& weight) {
  SINKLM_ASSERT(weight.dim() == 2 && weight.is_floating_point(), "weight ", weight.sizes());
  torch::NoGradGuard no_grad;
  const int64_t N = weight.size(0), K = weight.size(1), blocks = (K + kInt8Block - 1) / kInt8Block;
  auto padded = torch::zeros({N, blocks * kInt8Block}, weight.options().dtype(torch::kFloat32));
  padded.narrow(1, 0, K).copy_(weight);
  const auto w = padded.view({N, blocks, kInt8Block});
  auto scale = w.abs().amax(2, /*keepdim=*/true) / 127.0f;          // [N, blocks, 1]
  scale = torch::where(scale > 0, scale, torch::ones_like(scale));  // an all-zero block quantizes to zeros
  auto q = torch::round(w / scale).clamp(-127, 127).to(torch::kInt8).view({N, blocks * kInt8Block}).narrow(1, 0, K);
  return {q.contiguous(), scale.squeeze(2).contiguous()};
}

torch::Tensor dequantize_int8(const Int8Weight& w) {
  const int64_t K = w.q.size(1);
  const auto per_input = w.scale.to(torch::kFloat32).repeat_interleave(kInt8Block, 1).narrow(1, 0, K);  // [N, K]
  return w.q.to(torch::kFloat32) * per_input;
}

torch::ScalarType bf16_product_dtype(const torch::Device& device) {
  return !device.is_cpu() || cpu_has_avx512_bf16() ? torch::kBFloat16 : torch::kFloat32;
}

}  // namespace sinklm
