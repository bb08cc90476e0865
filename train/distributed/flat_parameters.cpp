#include "train/distributed/flat_parameters.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/ends_with.h"
#include "core/error.h"
#include "model/gpt_neox.h"

namespace sinklm {

bool takes_weight_decay(const std::string& name) {
  bool norm = name.find("layernorm") != std::string::npos || name.find("layer_norm") != std::string::npos;
  return !norm && !ends_with(name, ".bias");
}

FlatParameters::FlatParameters(torch::nn::Module& model, int64_t pad_multiple,
                               const std::vector<SinkParameter>& sink_parameters, double sink_lr_multiplier) {
  auto named = model.named_parameters();
  SINKLM_ASSERT(named.size() > 0, "model has no parameters");
  int64_t total = 0;
  for (auto it = named.items().rbegin(); it != named.items().rend(); ++it) {
    const torch::Tensor& p = it->value();
    SINKLM_ASSERT(p.scalar_type() == torch::kFloat32, "master weights must be float32: ", it->key());
    const SinkParameterSpec* sink = sink_parameter_spec(p, sink_parameters);
    slots_.push_back({it->key(), p, total, p.numel(), sink ? sink->weight_decay : takes_weight_decay(it->key()),
                      sink ? sink->lr_multiplier * sink_lr_multiplier : 1.0});
    total += p.numel();
  }
  const int64_t padded = (total + pad_multiple - 1) / pad_multiple * pad_multiple;
  auto options = slots_.front().param.options();
  values_ = torch::zeros({padded}, options);
  grads_ = torch::zeros({padded}, options);
  decay_ = torch::zeros({padded}, options);
  lr_scale_ = torch::ones({padded}, options);
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    auto value_view = values_.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
    value_view.copy_(slot.param);
    slot.param.set_data(value_view);
    // Autograd accumulates into an existing .grad in place, so gradients land in grads_ directly.
    slot.param.mutable_grad() = grads_.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
    decay_.narrow(0, slot.offset, slot.numel).fill_(slot.decay ? 1.0 : 0.0);
    lr_scale_.narrow(0, slot.offset, slot.numel).fill_(slot.lr_multiplier);
  }
}

}  // namespace sinklm
