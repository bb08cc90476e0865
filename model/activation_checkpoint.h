// Activation checkpointing (train.activation_checkpointing): run a block without keeping its intermediate
// activations, keep only its input, and recompute the block inside backward (the "reentrant" scheme of
// torch.utils.checkpoint). Memory per layer drops from all its activations to one [B, T, C] input, for
// about one more forward of compute. The block must be deterministic (GPT-NeoX has no dropout), so the
// recomputed values, the loss and the gradients equal the plain path's.
#pragma once
#include <torch/types.h>

#include <functional>

namespace sinklm {

using Block = std::function<torch::Tensor(const torch::Tensor&)>;

// block(x), whose backward recomputes block(x) and back-propagates through it; gradients of the parameters
// the block uses accumulate into their .grad as usual. Outside grad mode: just block(x).
// The block is called again during backward: whatever it captures must still be alive then.
torch::Tensor recompute_in_backward(Block block, const torch::Tensor& x);

}  // namespace sinklm
