// Runs the real carapace binary in a child process, for tests that crash it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/child_process.h"

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
  ChildResult r;
  r.status = run_child_process(binary, args, log_path);
  return r;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace carapace::testing
