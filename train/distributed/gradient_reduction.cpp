#include "train/distributed/gradient_reduction.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "model/io/safetensors.h"
#include "train/distributed/gradient_synchronizer.h"

namespace sinklm {
namespace {

// Every rank holds all gradients after an all-reduce (none with one rank) and the whole optimizer state.
class ReplicatedReduction : public GradientReduction {
 public:
  ReplicatedReduction(FlatParameters& flat, Communicator& communicator, int64_t bucket_bytes, const AdamWOptions& adamw)
      : GradientReduction(flat, communicator, 0, flat.padded_numel(), adamw) {
    if (communicator.world_size() > 1)
      synchronizer_ = std::make_unique<GradientSynchronizer>(flat, communicator, bucket_bytes);
  }
  void begin_backward(bool final_micro_step) override {
    if (synchronizer_) synchronizer_->begin_backward(final_micro_step);
  }
  void synchronize() override {
    if (synchronizer_) synchronizer_->finish();
  }
  double global_norm() override { return flat_.grads().norm().item<double>(); }

 private:
  torch::Tensor reduced_grads() override { return flat_.grads(); }
  void share_weights() override {}  // every rank took the same step
  std::unique_ptr<GradientSynchronizer> synchronizer_;
};

// ZeRO stage 1: rank r owns range [r * n, (r + 1) * n) of the flat buffers and its AdamW moments.
class Zero1Reduction : public GradientReduction {
 public:
  Zero1Reduction(FlatParameters& flat, Communicator& communicator, const AdamWOptions& adamw)
      : GradientReduction(flat, communicator, communicator.rank() * (flat.padded_numel() / communicator.world_size()),
                          flat.padded_numel() / communicator.world_size(), adamw),
        shard_grads_(torch::zeros({shard_numel_}, flat.grads().options())) {}
  void begin_backward(bool) override {}  // communication waits for the whole gradient
  void synchronize() override { communicator_.reduce_scatter_sum(flat_.grads(), shard_grads_); }
  double global_norm() override {
    std::vector<double> norm2 = {shard_grads_.pow(2).sum().item<double>()};
    communicator_.allreduce_sum_host(norm2, "gradient norm");
    return std::sqrt(norm2[0]);
  }

 private:
  torch::Tensor reduced_grads() override { return shard_grads_; }
  void share_weights() override { communicator_.all_gather(shard_values().clone(), flat_.values()); }
  torch::Tensor shard_grads_;  // [n] this rank's reduced range
};

}  // namespace

GradientReduction::GradientReduction(FlatParameters& flat, Communicator& communicator, int64_t shard_begin,
                                     int64_t shard_numel, const AdamWOptions& adamw)
    : flat_(flat),
      communicator_(communicator),
      shard_begin_(shard_begin),
      shard_numel_(shard_numel),
      optimizer_(flat.decay_mask().narrow(0, shard_begin, shard_numel), flat.lr_scale().narrow(0, shard_begin, shard_numel),
                 adamw) {}

void GradientReduction::step(double norm, double clip, double lr) {
  auto grads = reduced_grads();
  if (clip > 0 && norm > clip) grads.mul_(clip / (norm + 1e-6));
  optimizer_.step(shard_values(), grads, lr);
  share_weights();
  flat_.grads().zero_();
}

void GradientReduction::restore(const OptimizerState& moments, int64_t adam_steps) {
  const int64_t numel = moments.exp_avg.numel();
  auto fit = [&](const torch::Tensor& full) {  // re-pad for this world size, then take this rank's range
    auto padded = torch::zeros({flat_.padded_numel()});
    padded.narrow(0, 0, numel).copy_(full);
    return padded.narrow(0, shard_begin_, shard_numel_).to(flat_.values().device());
  };
  torch::NoGradGuard no_grad;
  optimizer_.exp_avg().copy_(fit(moments.exp_avg));
  optimizer_.exp_avg_sq().copy_(fit(moments.exp_avg_sq));
  optimizer_.set_steps_taken(adam_steps);
}

// optimizer.safetensors (replicated: rank 0 writes it) or optimizer.rank<R>.safetensors (ZeRO-1: each rank
// its range); "begin"/"end" metadata give the range (train/training_checkpoint.h).
void GradientReduction::write_optimizer_state(const std::string& staging_dir) const {
  if (!sharded() && !communicator_.is_root()) return;
  const std::string file = sharded() ? "optimizer.rank" + std::to_string(communicator_.rank()) + ".safetensors"
                                     : "optimizer.safetensors";
  write_safetensors(staging_dir + "/" + file, {{"exp_avg", optimizer_.exp_avg()}, {"exp_avg_sq", optimizer_.exp_avg_sq()}},
                    {{"begin", std::to_string(shard_begin_)}, {"end", std::to_string(shard_begin_ + shard_numel_)}});
}

std::vector<std::string> GradientReduction::optimizer_files() const {
  if (!sharded()) return {"optimizer.safetensors"};
  std::vector<std::string> files;
  for (int r = 0; r < communicator_.world_size(); ++r) files.push_back("optimizer.rank" + std::to_string(r) + ".safetensors");
  return files;
}

std::unique_ptr<GradientReduction> make_gradient_reduction(FlatParameters& flat, Communicator& communicator, bool zero,
                                                           int64_t bucket_bytes, const AdamWOptions& adamw) {
  if (zero && communicator.world_size() > 1) return std::make_unique<Zero1Reduction>(flat, communicator, adamw);
  return std::make_unique<ReplicatedReduction>(flat, communicator, bucket_bytes, adamw);
}

}  // namespace sinklm
