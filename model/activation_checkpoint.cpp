#include "model/activation_checkpoint.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include "model/autocast_guard.h"

namespace sinklm {
namespace {

// The backward node of one checkpointed block: holds the block's input (detached) and the autocast state
// of its forward, recomputes the block with grad on and runs backward through the recomputed graph.
class RecomputeBlock : public torch::autograd::Node {
 public:
  RecomputeBlock(Block block, const torch::Tensor& input)
      : block_(std::move(block)),
        input_(input.detach()),
        input_requires_grad_(input.requires_grad()),
        autocast_(AutocastGuard::enabled(input.device())),
        autocast_dtype_(AutocastGuard::dtype(input.device())) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    torch::Tensor input = input_.detach().requires_grad_(input_requires_grad_);
    torch::Tensor output;
    {
      torch::AutoGradMode grad_on(true);
      std::optional<AutocastGuard> autocast;  // same precision as the forward: same values
      if (autocast_) autocast.emplace(input.device(), autocast_dtype_);
      output = block_(input);
    }
    // Reentrant backward: accumulates the block's parameter gradients and input.grad.
    torch::autograd::backward({output}, {grads[0]});
    input_ = torch::Tensor();  // one backward per forward; free the input now
    return {input_requires_grad_ ? input.grad() : torch::Tensor()};
  }

  void release_variables() override { input_ = torch::Tensor(); }

 private:
  Block block_;
  torch::Tensor input_;  // detached: what backward recomputes from
  bool input_requires_grad_;
  bool autocast_;
  at::ScalarType autocast_dtype_;
};

}  // namespace

torch::Tensor recompute_in_backward(Block block, const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled()) return block(x);
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;  // nothing inside the block is kept for backward
    output = block(x);
  }
  auto node = std::shared_ptr<RecomputeBlock>(new RecomputeBlock(std::move(block), x), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(x));
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace sinklm
