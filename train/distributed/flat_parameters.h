// Every trainable parameter of a model as a view into one contiguous float32 buffer, and its gradient as a
// view into a second one. Collectives and the optimizer then work on a few large slices instead of
// hundreds of small tensors, and ZeRO-1 shards are plain ranges. Parameters are laid out in reverse
// registration order: backward produces gradients from the output layer down, so the gradient buffer fills
// front to back and all-reduce buckets become ready in order.
#pragma once
#include <torch/nn/module.h>

#include "model/gpt_neox.h"

#include <string>
#include <vector>

namespace sinklm {

struct ParameterSlot {
  std::string name;
  torch::Tensor param;
  int64_t offset = 0, numel = 0;  // range in the flat buffers
  bool decay = true;              // AdamW weight decay applies (not LayerNorms, biases, sink parameters)
  double lr_multiplier = 1.0;     // its learning rate as a multiple of train.lr (a sink parameter's spec)
};

class FlatParameters {
 public:
  // `pad_multiple`: the buffers' length is rounded up to it (ZeRO-1 needs world_size equal shards).
  // `sink_parameters` (GPTNeoXForCausalLMImpl::sink_parameters) get the weight decay and learning rate their
  // spec gives (model/sink.h), their learning rate further times `sink_lr_multiplier` (train.sink_lr_multiplier);
  // the other parameters decay unless takes_weight_decay says not.
  FlatParameters(torch::nn::Module& model, int64_t pad_multiple, const std::vector<SinkParameter>& sink_parameters,
                 double sink_lr_multiplier = 1.0);

  const std::vector<ParameterSlot>& slots() const { return slots_; }
  int64_t padded_numel() const { return values_.numel(); }
  const torch::Tensor& values() const { return values_; }  // [N] float32
  const torch::Tensor& grads() const { return grads_; }    // [N] float32
  const torch::Tensor& decay_mask() const { return decay_; }  // [N] 1.0 where weight decay applies
  const torch::Tensor& lr_scale() const { return lr_scale_; }   // [N] each element's lr_multiplier

 private:
  std::vector<ParameterSlot> slots_;
  torch::Tensor values_, grads_, decay_, lr_scale_;
};

// By name, for the model's own parameters: not LayerNorms, not biases.
bool takes_weight_decay(const std::string& parameter_name);

}  // namespace sinklm
