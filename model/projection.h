// The decoder's Linear layers: a torch::nn::Linear (same parameters "weight" [out, in] and "bias" [out],
// same names, same results) that can also hold its weight in an inference format (model/io/weight_format.h) and
// a copy packed for products with few rows (model/kernels/few_row_matmul.h), the shape of every product in a
// decode step. Serving packs the layers once (CachedDecoder); training and evaluation never do and run
// LibTorch's linear.
#pragma once
#include <torch/nn/modules/linear.h>

#include "model/kernels/few_row_matmul.h"

namespace sinklm {

class ProjectionImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;

  // Rows up to which the packed product runs (a decode step has one per decoding stream); larger products
  // (prefill chunks) stay with BLAS, whose large-product path does not re-read each weight panel per 16-row
  // tile as the kernel does. The crossover has not been measured.
  static constexpr int64_t kFewRows = 64;

  // x [..., in] -> [..., out] float32. The packed copy serves inputs of at most kFewRows rows (all dimensions
  // but the last), float32 on the CPU, with no gradient wanted, while the weight is the one packed (same
  // storage, unchanged since: its version counter). Otherwise a bf16 weight runs LibTorch's bf16 linear (x
  // rounded to bf16, float32 accumulation, the product rounded to bf16, then + bias in float32), and any other
  // weight LinearImpl::forward.
  torch::Tensor forward(const torch::Tensor& x);

  // What the decoder layer applies after a product (fused into it where the product runs in oneDNN).
  enum class Activation { None, Gelu };

  // activation(x · Wᵀ + b), [..., in] -> [..., out], in float32, except for a bf16 weight whose product runs in
  // bf16 (bf16_product_dtype) and the packed copy does not serve: the result then stays bf16, the bias and the
  // activation applied to the float32 accumulator inside the product (on the CPU one oneDNN call, no pass over
  // the output in float32). For products whose consumer takes either dtype: the decoder layer's, whose outputs
  // are rounded to bf16 again by the next product or added to the float32 residual stream. The LM head keeps
  // forward(): its logits stay float32.
  torch::Tensor forward_in_product_dtype(const torch::Tensor& x, Activation activation = Activation::None);

  // Holds the weight for inference in `format` (from fp32 only; the layer then stops being trainable as it
  // was): bf16 stores the parameter itself in bf16 (half the memory; the bias stays float32); int8 replaces
  // it by its int8 round trip, dequantize_int8(quantize_int8(W)), kept in float32 for larger
  // products, so that products of every size use the same weights; fp32 leaves it.
  void set_weight_format(WeightFormat format);
  WeightFormat weight_format() const { return format_; }

  // Packs a copy of the weight in weight_format() where the kernel applies (a CPU weight on a CPU with the
  // format's instructions: few_row_kernel_available) and says whether it did. A later change to the weight
  // retires the copy (forward falls back); pack again to use it.
  bool pack_for_few_rows();

  // Bytes a product of few rows reads: the packed copy's where there is one, else the weight's; + the bias.
  int64_t few_row_bytes() const;

 private:
  bool packed_copy_serves(const torch::Tensor& x) const;

  WeightFormat format_ = WeightFormat::Fp32;
  PackedWeight packed_;                // panels undefined until packed
  const void* packed_from_ = nullptr;  // the weight's storage when packed
  int64_t packed_version_ = -1;        // and its version counter
};
TORCH_MODULE(Projection);

}  // namespace sinklm
