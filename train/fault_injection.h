// Deliberate failures for the distributed tests (train.fault.*): SIGKILL this rank at a step or halfway
// through a checkpoint, hang it, poison its loss and gradients with NaN,
// or send it the stop signals a cluster sends (train/stop_signal.h). Off unless train.fault.step is set.
#pragma once
#include "train/train_options.h"

namespace sinklm {

class FaultInjection {
 public:
  FaultInjection(const TrainOptions& options, int rank) : options_(options), rank_(rank) {}
  // At the start of `step` (counted from 1): SIGKILL, hang, or raise SIGUSR1 / SIGTERM on this rank.
  void at_step_start(int64_t step) const;
  // Halfway through the checkpoint of `step`: SIGKILL, or the second SIGTERM of the sigterm action.
  void in_checkpoint(int64_t step) const;
  // True when this rank's loss and gradients of `step` (from 1) are to be made NaN.
  bool poisons(int64_t step) const;

 private:
  bool armed(int64_t step, FaultAction at) const;
  void announce(int64_t step) const;
  const TrainOptions& options_;
  int rank_;
};

}  // namespace sinklm
