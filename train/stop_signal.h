// A cluster's request to stop: SIGTERM (Slurm's preemption and time limit, `scancel`) or SIGUSR1 (what
// `sbatch --signal=B:USR1@300` sends ahead of the limit). The handler only records the signal; the trainer
// reads it at each step boundary inside the collective it already runs (train/trainer.cpp), so every rank
// learns of a signal that reached any one of them at the same step, checkpoints, and exits with
// kPreemptedExitCode. A second signal while the checkpoint is written is recorded and changes nothing.
#pragma once

namespace sinklm {

// The exit status of a run stopped by a signal after its checkpoint is durable: EX_TEMPFAIL (sysexits.h),
// "try again later". scripts/slurm_train.sbatch requeues the job on it.
constexpr int kPreemptedExitCode = 75;

// Installs the handlers for SIGTERM and SIGUSR1 (once per process; later calls do nothing).
void install_stop_signal_handlers();
// The first stop signal received since install (SIGTERM or SIGUSR1), or 0.
int received_stop_signal();
// "SIGTERM", "SIGUSR1".
const char* stop_signal_name(int signal);

}  // namespace sinklm
