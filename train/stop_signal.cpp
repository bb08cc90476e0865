#include "train/stop_signal.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>

#include "core/error.h"

namespace sinklm {
namespace {

// Written by the handler, read by the step loop: lock-free, so safe from a signal handler.
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void record(int signal) {
  int none = 0;
  first_signal.compare_exchange_strong(none, signal);
}

}  // namespace

void install_stop_signal_handlers() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_handler = record;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a signal must not fail a read or an MPI call with EINTR
    sigset_t signals;
    sigemptyset(&signals);
    for (int signal : {SIGTERM, SIGUSR1}) {
      SINKLM_ASSERT(::sigaction(signal, &action, nullptr) == 0, "sigaction(", signal, ") failed");
      sigaddset(&signals, signal);
    }
    // A launcher may have started us with them blocked; one that came before this line is delivered now.
    SINKLM_ASSERT(::pthread_sigmask(SIG_UNBLOCK, &signals, nullptr) == 0, "pthread_sigmask failed");
    return true;
  }();
  (void)installed;
}

int received_stop_signal() { return first_signal.load(); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a stop signal";
  }
}

}  // namespace sinklm
