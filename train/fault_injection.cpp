#include "train/fault_injection.h"

#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

namespace sinklm {

bool FaultInjection::armed(int64_t step, FaultAction at) const {
  return step == options_.fault_step && rank_ == options_.fault_rank && options_.fault_action == at;
}

void FaultInjection::maybe_fail(int64_t step, FaultAction at) const {
  if (!armed(step, at)) return;
  std::cerr << "sinklm train: fault injection (train.fault): rank " << rank_ << " at step " << step << "\n";
  if (at == FaultAction::Hang)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  ::raise(SIGKILL);
}

bool FaultInjection::poisons(int64_t step) const { return armed(step, FaultAction::Nan); }

}  // namespace sinklm
