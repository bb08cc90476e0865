// How the gradients of one optimizer step become an update, decided once per job:
//   - replicated: every rank sums all gradients (bucketed all-reduce overlapping backward, see
//     train/distributed/gradient_synchronizer.h) and steps the whole AdamW state identically;
//   - ZeRO-1 (train.zero = 1, more than one rank): gradients are reduce-scattered, each rank steps the AdamW
//     state of its range only and the updated weights are all-gathered.
// Both go synchronize -> norm -> clip -> step -> share weights, and both write their optimizer state in the
// files that train/training_checkpoint.h describes.
#pragma once
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "train/adamw.h"
#include "train/distributed/communicator.h"
#include "train/distributed/flat_parameters.h"
#include "train/training_checkpoint.h"

namespace sinklm {

class GradientReduction {
 public:
  virtual ~GradientReduction() = default;

  // Before each backward of an accumulation; only the final micro-step communicates.
  virtual void begin_backward(bool final_micro_step) = 0;
  // Sums this step's gradients over ranks: waits for the all-reduce started during backward (replicated) or
  // reduce-scatters (ZeRO-1).
  virtual void synchronize() = 0;
  // The global norm of the summed gradients (after synchronize()).
  virtual double global_norm() = 0;
  // Clips by `norm` to `clip` (0 = off), steps AdamW at `lr` on this rank's range, shares the weights and
  // zeroes the gradients.
  void step(double norm, double clip, double lr);
  // Drops this step's gradients (a skipped non-finite step).
  void discard() { flat_.grads().zero_(); }

  bool sharded() const { return shard_numel_ != flat_.padded_numel(); }
  const FlatAdamW& optimizer() const { return optimizer_; }
  // Puts the full (unpadded) moments of a checkpoint into this rank's range.
  void restore(const OptimizerState& moments, int64_t adam_steps);
  // The optimizer file this rank writes into `staging_dir` (a checkpoint being written), if any; and every
  // file of the checkpoint's optimizer state (rank 0 adopts them into the manifest).
  void write_optimizer_state(const std::string& staging_dir) const;
  std::vector<std::string> optimizer_files() const;

 protected:
  GradientReduction(FlatParameters& flat, Communicator& communicator, int64_t shard_begin, int64_t shard_numel,
                    const AdamWOptions& adamw);
  torch::Tensor shard_values() const { return flat_.values().narrow(0, shard_begin_, shard_numel_); }
  // The reduced gradients this rank steps with.
  virtual torch::Tensor reduced_grads() = 0;
  // After the optimizer step: make every rank's weights whole again.
  virtual void share_weights() = 0;

  FlatParameters& flat_;
  Communicator& communicator_;
  int64_t shard_begin_, shard_numel_;
  FlatAdamW optimizer_;
};

// Replicated, or ZeRO-1 when `zero` and there is more than one rank.
std::unique_ptr<GradientReduction> make_gradient_reduction(FlatParameters& flat, Communicator& communicator, bool zero,
                                                           int64_t bucket_bytes, const AdamWOptions& adamw);

}  // namespace sinklm
