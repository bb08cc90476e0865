// Deliberate failures for the distributed tests (train.fault.*): SIGKILL this rank at a step or halfway
// through a checkpoint, hang it, or poison its loss and gradients with NaN. Off unless train.fault.step is set.
#pragma once
#include "train/train_options.h"

namespace sinklm {

class FaultInjection {
 public:
  FaultInjection(const TrainOptions& options, int rank) : options_(options), rank_(rank) {}
  // Kills or hangs this rank when `step` (counted from 1) and `at` are the configured fault.
  void maybe_fail(int64_t step, FaultAction at) const;
  // True when this rank's loss and gradients of `step` (from 1) are to be made NaN.
  bool poisons(int64_t step) const;

 private:
  bool armed(int64_t step, FaultAction at) const;
  const TrainOptions& options_;
  int rank_;
};

}  // namespace sinklm
