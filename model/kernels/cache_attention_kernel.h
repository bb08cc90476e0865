// The two products of decode attention against cached keys and values, and the store of the new entry, for
// every stream and head of a batch at once. Each (stream, head) has one query row, so LibTorch's batched
// matmul runs them as m * H separate BLAS matrix-vector calls; on an AVX-512F CPU (and for bfloat16 K/V on an
// AVX2 one, whose LibTorch products in bfloat16 are slow) these functions run loops that read every cached key
// and value once, in place, at close to the memory bandwidth (the bound a decode step has), and elsewhere
// (other CPUs, float32 K/V on AVX2, CUDA, other layouts) LibTorch's ops with the products in the storage
// dtype. The loops are written once for both sets (model/kernels/cache_attention_loops.inc). The softmax between them stays LibTorch's (softmax_with_sink, model/sink.h), so the sink semantics
// live in one place. The kernels sum over the head dimension (scores) or the cache (outputs) in order, in
// float32: results differ from BLAS by rounding only (bfloat16 K/V: from LibTorch's bfloat16 products by their
// rounding, which the kernels do not do).
#pragma once
#include <torch/types.h>

namespace sinklm {

// Whether the kernels take these caches ([m, H, width, D] on the CPU, float32, bfloat16 or int8 (read as
// float32: products and sums in float32; int8 entries are read as their integers, and the caller multiplies
// scores and probabilities by the entry scales, decode/cache/kv_format.h); keys stored transposed, i.e. entries
// contiguous, as decode/cache/kv_pool.h lays them out; values with rows of D contiguous), with D a multiple of 16
// up to 128, on an AVX-512F CPU or, for bfloat16 and int8, an AVX2 one with FMA.
bool cache_attention_kernel_applies(const torch::Tensor& keys, const torch::Tensor& values);

// Writes entry i of new_keys and new_values ([n, H, D...]) into keys and values ([m, H, width, D...]) at
// [rows[i], :, columns[i]] (rows, columns: [n] int64 on the caches' device; bfloat16: rounded to nearest even,
// as .to() rounds; int8: the entries are already integers, quantize_kv). On the CPU a loop over the strides
// (any layout: the transposed keys, int8's [m, H, width, 1] scales), elsewhere index_put_: LibTorch's indexing
// machinery costs more per call than a decode step's few entries.
void store_cache_entries(const torch::Tensor& keys, const torch::Tensor& values, const torch::Tensor& rows,
                         const torch::Tensor& columns, const torch::Tensor& new_keys, const torch::Tensor& new_values);

// int8 K/V keeps exact float32 copies of the first S entries (the sinks, decode/cache/kv_pool.h), [m, H, S, D]:
// where given, those columns are scored and mixed from the copies, and their int8 entries are not read.

// queries [m, H, r, D] (r = 1; or r = 2 where the first `split` columns take query row 1 and the rest row 0),
// keys [m, H, width, D] -> float32 scores [m, H, 1, width]: scores[i, h, 0, j] = <query, keys[i, h, j]>, times
// key_scales[i, h, j] when given (int8 keys: [m, H, width] float16, entries contiguous); the first S columns
// <query, sink_keys[i, h, j]> when sink_keys is given (S <= split where r = 2).
torch::Tensor cached_key_scores(const torch::Tensor& queries, const torch::Tensor& keys, int64_t split,
                                const torch::Tensor& key_scales = {}, const torch::Tensor& sink_keys = {});

// probs [m, H, 1, width], values [m, H, width, D] -> [m, H, 1, D]: sum_j probs[i, h, 0, j] values[i, h, j], each
// probability times value_scales[i, h, j] when given (int8 values, as key_scales), the first S values taken
// from sink_values when given.
torch::Tensor cached_value_mix(const torch::Tensor& probs, const torch::Tensor& values,
                               const torch::Tensor& value_scales = {}, const torch::Tensor& sink_values = {});

}  // namespace sinklm
