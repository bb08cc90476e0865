#include "decode/attention/stored_run_attention.h"

#include <torch/torch.h>

#include "model/kernels/cache_attention_kernel.h"

namespace sinklm {

void store_decode_entries(KvFormat format, const KvLayer& run, const torch::Tensor& rows, const torch::Tensor& columns,
                          int64_t sinks, const torch::Tensor& new_keys, const torch::Tensor& new_values) {
  if (!kv_quantized(format)) return store_cache_entries(run.keys, run.values, rows, columns, new_keys, new_values);
  auto [qk, key_scales] = quantize_kv(new_keys);    // [n, H, D] int8, [n, H] float16
  auto [qv, value_scales] = quantize_kv(new_values);
  store_cache_entries(run.keys, run.values, rows, columns, qk, qv);
  using torch::indexing::Slice;
  KvLayer to = run;  // handles to the same storage
  to.key_scales.index_put_({rows, Slice(), columns}, key_scales);
  to.value_scales.index_put_({rows, Slice(), columns}, value_scales);
  if (!kv_sinks_exact(format)) return;
  const auto at_sink = columns.lt(sinks).nonzero().squeeze(1);  // only a stream's first S tokens
  if (at_sink.numel() == 0) return;
  const auto sink_rows = rows.index_select(0, at_sink), sink_columns = columns.index_select(0, at_sink);
  to.sink_keys.index_put_({sink_rows, Slice(), sink_columns}, new_keys.index_select(0, at_sink).to(torch::kFloat32));
  to.sink_values.index_put_({sink_rows, Slice(), sink_columns}, new_values.index_select(0, at_sink).to(torch::kFloat32));
}

torch::Tensor stored_key_scores(KvFormat format, const KvLayer& run, const torch::Tensor& queries, int64_t sinks) {
  auto scores = cached_key_scores(queries, run.keys, sinks, run.key_scales);  // [m, H, 1, width]
  if (kv_sinks_exact(format) && sinks > 0) {
    const auto sink_query = queries.narrow(2, queries.size(2) - 1, 1).to(torch::kFloat32);  // [m, H, 1, D]
    scores.narrow(-1, 0, sinks).copy_(torch::matmul(sink_query, run.sink_keys.transpose(2, 3)));
  }
  return scores;
}

torch::Tensor stored_value_mix(KvFormat format, const KvLayer& run, const torch::Tensor& probs, int64_t sinks) {
  if (!kv_sinks_exact(format) || sinks == 0) return cached_value_mix(probs, run.values, run.value_scales);
  // The int8 sink columns are left out: their exact copies stand in.
  return cached_value_mix(probs, run.values, run.value_scales, sinks) +
         torch::matmul(probs.narrow(-1, 0, sinks), run.sink_values);
}

}  // namespace sinklm
