#include "decode/cache/kv_format.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sinklm {

KvFormat parse_kv_format(const std::string& text, const std::string& field) {
  if (text == "fp32") return KvFormat::Fp32;
  if (text == "bf16") return KvFormat::Bf16;
  if (text == "int8") return KvFormat::Int8;
  if (text == "int8-all") return KvFormat::Int8All;
  fail(field, ": unknown K/V format '", text,
       "'; expected fp32, bf16, int8 (sink slots kept in float32) or int8-all (the sinks quantised too)");
}

const char* kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::Fp32: return "fp32";
    case KvFormat::Bf16: return "bf16";
    case KvFormat::Int8: return "int8";
    case KvFormat::Int8All: return "int8-all";
  }
  SINKLM_ASSERT(false, "unknown KvFormat ", static_cast<int>(format));
}

torch::ScalarType kv_storage_dtype(KvFormat format) {
  return format == KvFormat::Fp32 ? torch::kFloat32 : format == KvFormat::Bf16 ? torch::kBFloat16 : torch::kChar;
}

int64_t kv_entry_bytes(KvFormat format, int64_t head_dim) {
  const int64_t scale = kv_quantized(format) ? static_cast<int64_t>(c10::elementSize(kKvScaleDtype)) : 0;
  return head_dim * static_cast<int64_t>(c10::elementSize(kv_storage_dtype(format))) + scale;
}

int64_t kv_sink_extra_bytes(KvFormat format, int64_t head_dim) {
  return kv_sinks_exact(format) ? head_dim * static_cast<int64_t>(sizeof(float)) : 0;
}

std::pair<torch::Tensor, torch::Tensor> quantize_kv(const torch::Tensor& x) {
  // A loop per row, not LibTorch ops: decode quantises a few entries per layer and step, where a chain of
  // small ops costs more than the arithmetic.
  const auto x32 = x.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t D = x32.size(-1), rows = D == 0 ? 0 : x32.numel() / D;
  auto q = torch::empty(x32.sizes(), x32.options().dtype(torch::kChar));
  auto scales = torch::empty(x32.sizes().slice(0, x32.dim() - 1), x32.options().dtype(kKvScaleDtype));
  const float* in = x32.data_ptr<float>();
  int8_t* out = q.data_ptr<int8_t>();
  c10::Half* scale = scales.data_ptr<c10::Half>();
  for (int64_t r = 0; r < rows; ++r, in += D, out += D) {
    float absmax = 0;
    for (int64_t d = 0; d < D; ++d) absmax = std::max(absmax, std::fabs(in[d]));
    // The float16 scale, then its float32 value: the one a reader multiplies by.
    scale[r] = c10::Half(absmax / 127.0f);
    const float divisor = static_cast<float>(scale[r]);
    for (int64_t d = 0; d < D; ++d)  // nearest, ties to even
      out[d] = divisor > 0 ? static_cast<int8_t>(std::clamp(std::nearbyint(in[d] / divisor), -127.0f, 127.0f)) : 0;
  }
  return {q.to(x.device()), scales.to(x.device())};
}

torch::Tensor dequantize_kv(const torch::Tensor& q, const torch::Tensor& scales) {
  return q.to(torch::kFloat32) * scales.to(torch::kFloat32).unsqueeze(-1);
}

torch::Tensor kv_round_trip(KvFormat format, const torch::Tensor& x, bool sinks) {
  if (!kv_quantized(format)) return x.to(kv_storage_dtype(format));
  if (sinks && kv_sinks_exact(format)) return x.to(torch::kFloat32);
  auto [q, scales] = quantize_kv(x);
  return dequantize_kv(q, scales);
}

}  // namespace sinklm
