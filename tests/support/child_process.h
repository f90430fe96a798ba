// Runs the real carapace binary in a child process, for tests that crash it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace carapace::testing {

struct ChildResult {
  int status = 0;
  bool killed() const { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }
  bool succeeded() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Runs `binary args...`, appending its output to `log_path`.
inline ChildResult run_child(const std::string& binary, const std::vector<std::string>& args,
                             const std::string& log_path) {
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* out = std::fopen(log_path.c_str(), "a");
    if (out != nullptr) {
      ::dup2(fileno(out), STDOUT_FILENO);
      ::dup2(fileno(out), STDERR_FILENO);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ChildResult r;
  ::waitpid(pid, &r.status, 0);
  return r;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace carapace::testing
