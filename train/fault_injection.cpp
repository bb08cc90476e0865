#include "train/fault_injection.h"

#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

namespace sinklm {

bool FaultInjection::armed(int64_t step, FaultAction at) const {
  return step == options_.fault_step && rank_ == options_.fault_rank && options_.fault_action == at;
}

void FaultInjection::announce(int64_t step) const {
  std::cerr << "sinklm train: fault injection (train.fault): rank " << rank_ << " at step " << step << "\n";
}

void FaultInjection::at_step_start(int64_t step) const {
  if (step != options_.fault_step || rank_ != options_.fault_rank) return;
  switch (options_.fault_action) {
    case FaultAction::Kill: announce(step); ::raise(SIGKILL); break;
    case FaultAction::Hang:
      announce(step);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    case FaultAction::Sigusr1: announce(step); ::raise(SIGUSR1); break;
    case FaultAction::Sigterm: announce(step); ::raise(SIGTERM); break;
    default: break;
  }
}

void FaultInjection::in_checkpoint(int64_t step) const {
  if (armed(step, FaultAction::KillInCheckpoint)) {
    announce(step);
    ::raise(SIGKILL);
  }
  if (armed(step, FaultAction::Sigterm)) {
    std::cerr << "sinklm train: fault injection (train.fault): a second SIGTERM during the checkpoint\n";
    ::raise(SIGTERM);
  }
}

bool FaultInjection::poisons(int64_t step) const { return armed(step, FaultAction::Nan); }

}  // namespace sinklm
