#include "model/attention/attention.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "model/sink.h"

namespace sinklm {
namespace {

// [Tq, Tk] bool, true where query i may attend key j (bottom-right aligned causal).
torch::Tensor causal_visibility(int64_t tq, int64_t tk, torch::Device device) {
  auto opts = torch::TensorOptions().dtype(torch::kBool).device(device);
  return torch::ones({tq, tk}, opts).tril(tk - tq);
}

void check_shapes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const SinkColumn& sink) {
  SINKLM_ASSERT(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "q/k/v must be [B, H, T, D]");
  SINKLM_ASSERT(k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3));
  SINKLM_ASSERT(k.size(2) >= q.size(2), "more queries than keys");
  SINKLM_ASSERT(!sink.present() || (sink.logit.dim() == 1 && sink.heads() == q.size(1)), "sink logit must be [H]");
  for (const auto* t : {&sink.key, &sink.value})
    SINKLM_ASSERT(!t->defined() || t->sizes() == torch::IntArrayRef({q.size(1), q.size(3)}), "sink key/value must be [H, D]");
}

// Padding of the head dim that carries the sink logit in the fast path; a multiple of 8 keeps the fused
// kernels (which need D % 8 == 0) eligible.
constexpr int64_t kSinkPad = 8;

// `t` [H, D] (or undefined: zeros) as one more key or value row per head, [B, H, 1, D].
torch::Tensor sink_row(const torch::Tensor& t, int64_t B, int64_t H, int64_t D, const torch::TensorOptions& opts) {
  if (!t.defined()) return torch::zeros({B, H, 1, D}, opts);
  return t.to(opts.dtype().toScalarType()).view({1, H, 1, D}).expand({B, H, 1, D});
}

// The fast path for a sink column: an extra key at index 0 whose dot product with every real query equals
// c_i / scale = b_h / scale + q_i . key_h. Queries get a constant 1 in the first padded dim, the sink key holds
// key_h (zeros without one) in the first D dims and b_h / scale in that padded dim, real keys hold 0 there:
// q'.k'_sink * scale = c_i, q'.k'_j * scale = q.k_j * scale. The sink's value row is value_h (zeros without
// one: it only takes probability mass). Gradients reach the column through ordinary SDPA backward.
torch::Tensor fast_attention_with_sink(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const SinkColumn& sink, double scale) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3);
  auto opts = q.options();
  auto q_ext = torch::cat({q, torch::ones({B, H, Tq, 1}, opts), torch::zeros({B, H, Tq, kSinkPad - 1}, opts)}, 3);
  auto sink_logit = (sink.logit / scale).to(q.scalar_type()).view({1, H, 1, 1}).expand({B, H, 1, 1});
  auto sink_key = torch::cat({sink_row(sink.key, B, H, D, opts), sink_logit, torch::zeros({B, H, 1, kSinkPad - 1}, opts)}, 3);
  auto k_ext = torch::cat({sink_key, torch::cat({k, torch::zeros({B, H, Tk, kSinkPad}, opts)}, 3)}, 2);
  auto sink_value = torch::cat({sink_row(sink.value, B, H, D, opts), torch::zeros({B, H, 1, kSinkPad}, opts)}, 3);
  auto v_ext = torch::cat({sink_value, torch::cat({v, torch::zeros({B, H, Tk, kSinkPad}, opts)}, 3)}, 2);
  torch::Tensor out;
  if (Tq == Tk) {
    // A dummy query in front makes the (Tk+1)-square problem plain top-left causal: real query i (row i+1)
    // sees the sink and keys 0..i. The dummy row's output is dropped.
    q_ext = torch::cat({torch::zeros({B, H, 1, D + kSinkPad}, opts), q_ext}, 2);
    out = at::scaled_dot_product_attention(q_ext, k_ext, v_ext, {}, 0.0, /*is_causal=*/true, scale).narrow(2, 1, Tq);
  } else {
    auto visible = torch::cat({torch::ones({Tq, 1}, torch::TensorOptions().dtype(torch::kBool).device(q.device())),
                               causal_visibility(Tq, Tk, q.device())}, 1);
    out = at::scaled_dot_product_attention(q_ext, k_ext, v_ext, visible, 0.0, false, scale);
  }
  return out.narrow(3, 0, D);
}

torch::Tensor fast_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const SinkColumn& sink, double scale) {
  if (sink.present()) return fast_attention_with_sink(q, k, v, sink, scale);
  if (q.size(2) == k.size(2)) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, scale);
  return at::scaled_dot_product_attention(q, k, v, causal_visibility(q.size(2), k.size(2), q.device()), 0.0, false,
                                          scale);
}

}  // namespace

torch::Tensor causal_attention_probabilities(const torch::Tensor& q, const torch::Tensor& k, const SinkColumn& sink,
                                             const torch::Tensor& hidden) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto scores = torch::matmul(q.to(torch::kFloat32), k.to(torch::kFloat32).transpose(2, 3)) * scale;  // [B,H,Tq,Tk]
  auto masked = causal_visibility(Tq, Tk, q.device()).logical_not();
  if (hidden.defined()) masked = masked.logical_or(hidden.to(q.device()));
  scores = scores.masked_fill(masked, -std::numeric_limits<float>::infinity());
  return softmax_with_sink(scores, sink.to(torch::kFloat32), q);
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const SinkColumn& sink, AttentionImpl impl) {
  check_shapes(q, k, v, sink);
  // SDPA folds softmax (and its column); a mode with its own normaliser takes the reference path.
  if (impl == AttentionImpl::Fast && sink.softmax()) return fast_attention(q, k, v, sink, 1.0 / std::sqrt(double(q.size(3))));
  auto probs = causal_attention_probabilities(q, k, sink);  // [B, H, Tq, Tk]
  auto out = torch::matmul(probs, v.to(torch::kFloat32));
  if (auto from_sink = sink_value_output(probs, sink); from_sink.defined()) out = out + from_sink;
  return out.to(q.scalar_type());
}

}  // namespace sinklm
