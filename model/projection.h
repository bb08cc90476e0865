// The decoder's Linear layers: a torch::nn::Linear (same parameters "weight" [out, in] and "bias" [out],
// same names, same results) that can also hold a copy of its weight packed for products with few rows
// (model/kernels/few_row_matmul.h), the shape of every product in a decode step. Serving packs the layers once
// (CachedDecoder); training and evaluation never do and run LibTorch's linear.
#pragma once
#include <torch/nn/modules/linear.h>

namespace sinklm {

class ProjectionImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;

  // Rows up to which the packed product runs (a decode step has one per decoding stream); larger products
  // (prefill chunks) stay with BLAS, whose large-product path does not re-read each weight panel per 16-row
  // tile as the kernel does. The crossover has not been measured.
  static constexpr int64_t kFewRows = 64;

  // x [..., in] -> [..., out]. The packed copy serves inputs of at most kFewRows rows (all dimensions but the
  // last), float32 on the CPU, with no gradient wanted, while the weight is the one packed (same storage,
  // unchanged since: its version counter); LinearImpl::forward everything else.
  torch::Tensor forward(const torch::Tensor& x);

  // Packs a copy of the weight where the kernel applies (a float32 CPU weight on an AVX-512 CPU) and says
  // whether it did. A later change to the weight retires the copy (forward falls back); pack again to use it.
  bool pack_for_few_rows();

 private:
  bool packed_copy_serves(const torch::Tensor& x) const;

  torch::Tensor packed_;  // [ceil(out / 16), in, 16] or undefined
  const void* packed_from_ = nullptr;  // the weight's storage when packed
  int64_t packed_version_ = -1;        // and its version counter
};
TORCH_MODULE(Projection);

}  // namespace sinklm
