// How a cache stores its K/V entries (--kv-dtype; "kv_dtype" in a policy's JSON and a session's state.json):
//   fp32      float32, as the model computes them
//   bf16      bfloat16: half the bytes every decode step reads; products in bfloat16, softmax in float32
//   int8      keys and values in int8 with one float16 scale per (entry, head): entry ≈ int8 · scale,
//             symmetric (scale = max |x| / 127 over the D values of one head's key or value). The S sink
//             slots are kept exact, in float32, beside the int8 ring: a sink entry is attended by every query
//             for the life of the stream, so its error would never be evicted (KVSink, Su and Yuan, 2025).
//             D = 64: 66 bytes an entry per head instead of bf16's 128.
//   int8-all  the same, but the sinks are quantised too: the ablation that says whether the exact sink matters.
// Decode attention reads the int8 entries in place (model/kernels/cache_attention_kernel.h) and scales scores
// and probabilities by the entry scales, so no widened copy of the cache is made per step.
#pragma once
#include <torch/types.h>

#include <string>
#include <utility>

namespace sinklm {

enum class KvFormat { Fp32, Bf16, Int8, Int8All };

// UserError naming `field` unless text is fp32 | bf16 | int8 | int8-all.
KvFormat parse_kv_format(const std::string& text, const std::string& field = "kv-dtype");
const char* kv_format_name(KvFormat format);

// The dtype of the entries as stored (int8 formats: int8 beside their scales) and the dtype attention
// multiplies them in (float32 for int8: the kernels widen each value as they read it).
torch::ScalarType kv_storage_dtype(KvFormat format);
inline bool kv_quantized(KvFormat format) { return format == KvFormat::Int8 || format == KvFormat::Int8All; }
// Whether the sink slots are stored apart, exact in float32 (int8).
inline bool kv_sinks_exact(KvFormat format) { return format == KvFormat::Int8; }
// Bytes of one head's key (or value) of one entry: D values and, quantised, the float16 scale; and what each
// sink slot adds on top (int8: its exact float32 copy).
int64_t kv_entry_bytes(KvFormat format, int64_t head_dim);
int64_t kv_sink_extra_bytes(KvFormat format, int64_t head_dim);

inline constexpr torch::ScalarType kKvScaleDtype = torch::kHalf;

// x [..., N, D] (float) -> {int8 [..., N, D], scales [..., N] float16}: one symmetric scale per row of D,
// the scale rounded to float16 first so that int8 · scale is exactly what a reader gets back. An all-zero row
// has scale 0. Re-quantising a row read back gives the same bytes (rows differing by float rounding too).
std::pair<torch::Tensor, torch::Tensor> quantize_kv(const torch::Tensor& x);
// int8 [..., N, D], scales [..., N] -> float32 [..., N, D].
torch::Tensor dequantize_kv(const torch::Tensor& q, const torch::Tensor& scales);
// What storing x [..., N, D] and reading it back gives, as attention reads it (float32 for int8, otherwise
// the storage dtype); `sinks`: the entries are sink slots (exact under int8).
torch::Tensor kv_round_trip(KvFormat format, const torch::Tensor& x, bool sinks);

}  // namespace sinklm
