#include "decode/attention/stored_run_attention.h"

#include <torch/torch.h>

#include <algorithm>

#include "model/kernels/cache_attention_kernel.h"

namespace sinklm {

// Whether any new entry takes a sink column (only a stream's first S tokens do): answered from the host copy
// of the columns where they are on the CPU, so a steady decode step launches no op for it.
bool stores_a_sink(const torch::Tensor& columns, int64_t sinks) {
  if (sinks == 0) return false;
  if (!columns.device().is_cpu()) return columns.lt(sinks).any().item<bool>();
  const auto c = columns.contiguous();
  const int64_t* column = c.data_ptr<int64_t>();
  return std::any_of(column, column + c.numel(), [&](int64_t j) { return j < sinks; });
}

void store_decode_entries(KvFormat format, const KvLayer& run, const torch::Tensor& rows, const torch::Tensor& columns,
                          int64_t sinks, const torch::Tensor& new_keys, const torch::Tensor& new_values) {
  if (!kv_quantized(format)) return store_cache_entries(run.keys, run.values, rows, columns, new_keys, new_values);
  auto [qk, key_scales] = quantize_kv(new_keys);    // [n, H, D] int8, [n, H] float16
  auto [qv, value_scales] = quantize_kv(new_values);
  store_cache_entries(run.keys, run.values, rows, columns, qk, qv);
  // The scales as entries of one element: [m, H, width, 1] at [rows[i], :, columns[i]].
  store_cache_entries(run.key_scales.unsqueeze(3), run.value_scales.unsqueeze(3), rows, columns,
                      key_scales.unsqueeze(2), value_scales.unsqueeze(2));
  if (!kv_sinks_exact(format) || !stores_a_sink(columns, sinks)) return;
  const auto at_sink = columns.lt(sinks).nonzero().squeeze(1);
  store_cache_entries(run.sink_keys, run.sink_values, rows.index_select(0, at_sink), columns.index_select(0, at_sink),
                      new_keys.index_select(0, at_sink).to(torch::kFloat32),
                      new_values.index_select(0, at_sink).to(torch::kFloat32));
}

torch::Tensor stored_key_scores(KvFormat format, const KvLayer& run, const torch::Tensor& queries, int64_t sinks) {
  const bool exact = kv_sinks_exact(format) && sinks > 0;
  return cached_key_scores(queries, run.keys, sinks, run.key_scales, exact ? run.sink_keys : torch::Tensor());
}

torch::Tensor stored_value_mix(KvFormat format, const KvLayer& run, const torch::Tensor& probs, int64_t sinks) {
  const bool exact = kv_sinks_exact(format) && sinks > 0;
  return cached_value_mix(probs, run.values, run.value_scales, exact ? run.sink_values : torch::Tensor());
}

}  // namespace sinklm
