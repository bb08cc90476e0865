// Decode attention over a run of stored streams (a KvLayer [m, ...], decode/cache/kv_pool.h), in any K/V format
// (decode/cache/kv_format.h): the new entries stored, the scores against every cached key and the mix of the
// cached values, each reading the entries in place through model/kernels/cache_attention_kernel.h (int8: the
// kernels multiply by the entries' integers and their float16 scales as they go). Under int8 the sink
// columns are scored and mixed from their exact float32 copies instead.
#pragma once
#include <torch/types.h>

#include "decode/cache/kv_format.h"
#include "decode/cache/kv_pool.h"

namespace sinklm {

// Stores entry i of new_keys and new_values ([n, H, D] float32) at [rows[i], :, columns[i]] of the run, in its
// format; an entry at a column below `sinks` (a sink slot) goes to the exact copy where the format keeps one.
void store_decode_entries(KvFormat format, const KvLayer& run, const torch::Tensor& rows, const torch::Tensor& columns,
                          int64_t sinks, const torch::Tensor& new_keys, const torch::Tensor& new_values);

// queries [m, H, r, D] as cached_key_scores takes them (the first `sinks` columns against row r - 1) ->
// float32 scores [m, H, 1, S + capacity].
torch::Tensor stored_key_scores(KvFormat format, const KvLayer& run, const torch::Tensor& queries, int64_t sinks);

// probs [m, H, 1, S + capacity] float32 -> [m, H, 1, D] float32: sum_j probs[j] · value j.
torch::Tensor stored_value_mix(KvFormat format, const KvLayer& run, const torch::Tensor& probs, int64_t sinks);

}  // namespace sinklm
