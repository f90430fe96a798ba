#include "tools/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace carapace::cli {
namespace {

std::atomic<bool> armed{false};
std::atomic<int> received{0};

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void watch() {
  const sigset_t set = stop_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (armed.load()) {
      int none = 0;
      received.compare_exchange_strong(none, sig);
      continue;
    }
    // Not armed: die of it, as without this thread.
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::kill(::getpid(), sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  }
}

}  // namespace

void install_stop_signals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch).detach();
}

void arm_stop_signals() { armed.store(true); }

void disarm_stop_signals() { armed.store(false); }

int stop_signal() { return received.load(); }

int take_stop_signal() { return received.exchange(0); }

}  // namespace carapace::cli
