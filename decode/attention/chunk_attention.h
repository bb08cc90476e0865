// Attention of a chunk of T prompt queries against what a stream cache holds, as runs of keys: the sinks, the
// ring of recent entries, and the chunk's own entries. Each run carries its columns' stream positions; who sees
// what is the sink+window rule (model/kernels/prompt_attention/online_softmax_kernel.h: WindowVisibility), so empty ring slots,
// evicted positions and the causal mask inside the chunk all follow from the positions.
//
// Two implementations, tested equal (tests/decode/chunk_attention_test.cpp):
//  - blocked (the CPU path where the online softmax kernel runs, softmax-normalised sink modes): blocks of
//    kKeyBlock columns, each [H, T, N] product a batched matmul in the runs' dtype (oneDNN: AMX or AVX512-BF16
//    for bf16), folded into a running softmax by model/kernels/prompt_attention/online_softmax_kernel.h, then mixed into the
//    outputs. Blocks no query of the chunk sees are skipped, so a prompt pays for the keys it has, not for the
//    cache's capacity. Nothing of size [T, S + capacity + T] exists. On a CPU with AMX-BF16, a bf16 run is
//    folded whole by model/kernels/prompt_attention/amx_attention.h instead (float32 scores that never leave L1).
//  - reference (any device, any normaliser): one [H, T, S + capacity + T] float32 score buffer, the mask from
//    the positions, softmax_with_sink (model/sink.h), and the products of its column blocks with the values.
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/kernels/prompt_attention/online_softmax_kernel.h"
#include "model/sink.h"

namespace sinklm {

struct KeyRun {
  torch::Tensor queries;          // [H, T, D]: the chunk's queries as this run's keys meet them (rotated alike)
  torch::Tensor keys, values;     // [H, N, D], the dtype of the products (queries alike)
  torch::Tensor positions;        // [N] int64 on the CPU: each column's stream position, -1 for an empty slot
};

// [H, T, D] float32: softmax over the sink column (when present) and every visible column of the runs, times
// their values. sink_queries [H, T, D]: the queries a sink column with a key meets (the sinks run's).
torch::Tensor chunk_attention(const std::vector<KeyRun>& runs, const WindowVisibility& visibility,
                              const SinkColumn& sink, const torch::Tensor& sink_queries);
torch::Tensor chunk_attention_reference(const std::vector<KeyRun>& runs, const WindowVisibility& visibility,
                                        const SinkColumn& sink, const torch::Tensor& sink_queries);

}  // namespace sinklm
