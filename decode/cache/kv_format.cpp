#include "decode/cache/kv_format.h"

#include <torch/torch.h>

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
  const auto x32 = x.to(torch::kFloat32);
  // The float16 scale, then its float32 value: the one the reader multiplies by.
  const auto scales = (x32.abs().amax(-1) / 127.0).to(kKvScaleDtype);  // [..., N]
  const auto divisor = scales.to(torch::kFloat32).unsqueeze(-1);
  const auto q = torch::where(divisor > 0, x32 / divisor, torch::zeros_like(x32)).round_().clamp_(-127, 127);
  return {q.to(torch::kChar), scales};
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
