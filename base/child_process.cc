#include "base/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace carapace {

int run_child_process(const std::string& binary, const std::vector<std::string>& args,
                      const std::string& log_path, pid_t* pid_out) {
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
    FILE* out = std::fopen(log_path.c_str(), "a");
    if (out != nullptr) {
      ::dup2(fileno(out), STDOUT_FILENO);
      ::dup2(fileno(out), STDERR_FILENO);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  if (pid_out != nullptr) *pid_out = pid;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace carapace
