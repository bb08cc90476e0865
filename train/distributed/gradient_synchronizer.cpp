#include "train/distributed/gradient_synchronizer.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

GradientSynchronizer::GradientSynchronizer(const FlatParameters& flat, Communicator& communicator,
                                           int64_t bucket_bytes)
    : flat_(flat), communicator_(communicator) {
  const int64_t bucket_numel = std::max<int64_t>(1, bucket_bytes / 4);
  std::vector<size_t> bucket_of;
  for (const auto& slot : flat.slots()) {
    if (buckets_.empty() || buckets_.back().numel >= bucket_numel) buckets_.push_back({slot.offset, 0});
    buckets_.back().numel += slot.numel;
    buckets_.back().parameters += 1;
    bucket_of.push_back(buckets_.size() - 1);
  }
  buckets_.back().numel = flat.padded_numel() - buckets_.back().offset;  // the padding travels with the last
  for (size_t i = 0; i < flat.slots().size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(flat.slots()[i].param);
    SINKLM_ASSERT(accumulator, "parameter without gradient accumulator: ", flat.slots()[i].name);
    size_t bucket = bucket_of[i];
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, bucket](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          parameter_ready(bucket);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));
  }
}

void GradientSynchronizer::begin_backward(bool final_micro_step) {
  communicating_ = final_micro_step;
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.parameters;
    bucket.started = false;
  }
}

void GradientSynchronizer::parameter_ready(size_t index) {
  if (!communicating_) return;
  Bucket& bucket = buckets_[index];
  if (--bucket.pending == 0) start(bucket);
}

void GradientSynchronizer::start(Bucket& bucket) {
  SINKLM_ASSERT(!bucket.started);
  bucket.started = true;
  communicator_.start_allreduce_sum(flat_.grads().narrow(0, bucket.offset, bucket.numel));
}

void GradientSynchronizer::finish() {
  SINKLM_ASSERT(communicating_, "finish() without a final micro-step");
  for (auto& bucket : buckets_)
    if (!bucket.started) start(bucket);
  communicator_.wait_all("gradient all-reduce");
  communicating_ = false;
}

}  // namespace sinklm
