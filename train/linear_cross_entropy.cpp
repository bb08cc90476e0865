#include "train/linear_cross_entropy.h"

#include <torch/torch.h>

#include "core/error.h"
#include "model/kernels/softmax_cross_entropy.h"

namespace sinklm {
namespace {

// Rows per chunk: about 2M logits (8 MB), so that the softmax passes over a chunk run in the last-level cache
// (32 MB chunks went to memory: 1.3x slower softmax on `small`), at least 256 rows so the GEMMs stay efficient.
int64_t chunk_rows(int64_t vocab) { return std::max<int64_t>(256, (int64_t{2} << 20) / vocab); }

// Adds the chunk's summed cross-entropy to `loss`; returns its logits [r, V] turned into softmax - one-hot
// (when `gradient`). On an AVX-512 CPU in one kernel (model/kernels/softmax_cross_entropy.h), else with LibTorch's ops.
torch::Tensor chunk_loss_and_gradient(torch::Tensor logits, const torch::Tensor& t, const torch::Tensor& keep,
                                      torch::Tensor& loss, bool gradient) {
  if (softmax_cross_entropy_applies(logits)) {
    loss.add_(softmax_cross_entropy(logits, t.squeeze(1), keep.squeeze(1), gradient));
    return logits;
  }
  auto log_probs = torch::log_softmax(logits, 1);
  loss.sub_(log_probs.gather(1, t).mul_(keep).sum());
  return gradient ? log_probs.exp_().scatter_add_(1, t, keep.neg()) : log_probs;
}

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& target, int64_t ignore_index) {
    const int64_t N = hidden.size(0), step = chunk_rows(weight.size(0));
    const bool wants_grad = hidden.requires_grad() || weight.requires_grad();
    auto valid = target.ne(ignore_index).to(hidden.scalar_type());  // [N] 1 where the row is predicted
    auto safe_target = target.masked_fill(target.eq(ignore_index), 0).unsqueeze(1);  // [N, 1] a valid index
    auto loss = torch::zeros({}, hidden.options());
    torch::Tensor grad_hidden, grad_weight;
    if (wants_grad) {
      grad_hidden = torch::empty_like(hidden);  // [N, C]
      grad_weight = torch::empty_like(weight);  // [V, C], written by the first chunk
    }
    for (int64_t begin = 0; begin < N; begin += step) {
      const int64_t rows = std::min(step, N - begin);
      auto h = hidden.narrow(0, begin, rows);                                // [r, C]
      auto keep = valid.narrow(0, begin, rows).unsqueeze(1);                 // [r, 1]
      auto t = safe_target.narrow(0, begin, rows);                           // [r, 1]
      // grad_logits = d loss / d logits = softmax - one-hot. Ignored rows are not zeroed here (a pass over
      // [r, V]); their hidden rows are zeroed for the weight gradient and their hidden gradient rows afterwards.
      auto grad_logits = chunk_loss_and_gradient(torch::mm(h, weight.t()), t, keep, loss, wants_grad);  // [r, V]
      if (!wants_grad) continue;
      auto grad_h = grad_hidden.narrow(0, begin, rows);
      torch::mm_out(grad_h, grad_logits, weight).mul_(keep);                 // [r, C]
      if (begin == 0) torch::mm_out(grad_weight, grad_logits.t(), h * keep);  // [V, C]
      else grad_weight.addmm_(grad_logits.t(), h * keep);
    }
    ctx->saved_data["grad_hidden"] = grad_hidden;
    ctx->saved_data["grad_weight"] = grad_weight;
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    const auto& g = grad_output[0];  // [] d total / d loss
    return {ctx->saved_data["grad_hidden"].toTensor() * g, ctx->saved_data["grad_weight"].toTensor() * g,
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& target, int64_t ignore_index) {
  SINKLM_ASSERT(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1), "hidden [N, C], weight [V, C]");
  SINKLM_ASSERT(target.dim() == 1 && target.size(0) == hidden.size(0) && hidden.size(0) > 0, "target [N], N > 0");
  SINKLM_ASSERT(hidden.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32, "float32 only");
  return LinearCrossEntropy::apply(hidden, weight, target, ignore_index);
}

}  // namespace sinklm
