#include "base/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>

namespace carapace {

pid_t spawn_child_process(const std::string& binary, const std::vector<std::string>& args,
                          const std::string& log_path) {
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // The caller may block signals (carapace blocks SIGINT and SIGTERM for
    // its watcher thread); the child starts with none blocked.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    FILE* out = std::fopen(log_path.c_str(), "a");
    if (out != nullptr) {
      ::dup2(fileno(out), STDOUT_FILENO);
      ::dup2(fileno(out), STDERR_FILENO);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

bool wait_child_process(pid_t pid, uint64_t timeout_ms, int* status) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {
      *status = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int run_child_process(const std::string& binary, const std::vector<std::string>& args,
                      const std::string& log_path, pid_t* pid_out) {
  pid_t pid = spawn_child_process(binary, args, log_path);
  if (pid < 0) return -1;
  if (pid_out != nullptr) *pid_out = pid;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace carapace
