// What bounds a decode step on this machine: the roofline `bench-decode` prints beside its figure.
//
// A decode step reads every weight once (the embedding only its K rows) and every stream's K and V once, so at
// the measured read bandwidth B (bytes per second a reduction over a 256 MiB tensor reads, which writes
// nothing, like the step's weight stream) a step of K streams takes at least (weight_bytes + K *
// kv_bytes_per_stream) / B, and K streams decode at most K / that tokens/s. A step also multiplies: 2 FLOPs
// per weight of the Linears (LM head included) and 4 C FLOPs per cached entry and layer (scores and weighted
// values) per stream, which at the measured rate R of its products bounds it at R / flops_per_token tokens/s.
// The roofline, the lower of the two, is what no step can pass (adding the two times would assume they never
// overlap, which the hardware's prefetch and out-of-order loads disprove: steps ran faster than that sum).
#pragma once
#include <torch/types.h>

#include <map>
#include <string>

#include "model/gpt_neox.h"
#include "model/io/weight_format.h"

namespace sinklm {

// Bytes per second a sum over a large float32 tensor on `device` reads: the memory bandwidth one LibTorch
// thread pool reaches here for a stream that only reads (on an AVX-512 CPU the faster of LibTorch's sum and a
// one-thread AVX-512 read that asks for its lines ahead, as the decode kernels do), or the GPU's device memory
// bandwidth.
double measured_read_bandwidth(torch::Device device);

// FLOP/s of the products a decode step runs, on `device`: on an AVX-512 CPU the few-row kernel in the
// weights' `format` (model/kernels/few_row_matmul.h; 16 rows by a 256 x 1024 weight, which stays in L2),
// elsewhere 1024^3 float32 torch::mm.
double measured_matmul_rate(torch::Device device, WeightFormat format);

// Bytes one decode step reads from the weights: every parameter except the input embedding (a lookup), each
// projection's as its few-row product reads it (packed in its format: model/projection.h).
double decode_weight_bytes(GPTNeoXForCausalLM& model);

// FLOPs of one decode token: 2 per weight of the Linears (every matrix but the input embedding, a lookup; the
// LM head included) and 4 C per cached entry and layer (scores and weighted values).
double decode_flops_per_token(GPTNeoXForCausalLM& model, double entries_per_head);

// The projections' weights per format they are held in (model/projection.h); their names "+"-joined (fp32,
// bf16, int8, or fp32+int8 with the LM head kept float32); the format holding the most weights (whose product
// rate bounds the step).
std::map<WeightFormat, int64_t> weights_per_format(GPTNeoXForCausalLM& model);
std::string format_names(const std::map<WeightFormat, int64_t>& weights);
WeightFormat main_format(const std::map<WeightFormat, int64_t>& weights);

// The two bounds of K streams decoding together, in tokens per second, and the roofline (their minimum).
struct DecodeBounds {
  double memory = 0, compute = 0;
  double roofline() const { return memory < compute ? memory : compute; }
};
DecodeBounds decode_bounds(int64_t streams, double weight_bytes, double kv_bytes_per_stream, double read_bandwidth,
                           double flops_per_token, double matmul_rate);

}  // namespace sinklm
