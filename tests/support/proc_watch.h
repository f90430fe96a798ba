// Looks in /proc for processes by their exact command line: how the tests
// prove that nothing a tool call started is still running, and make sure a
// failing test does not leave such a process behind.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace carapace::testing {

// Live (not zombie) processes whose argv is exactly `argv`.
inline std::vector<pid_t> find_processes(const std::vector<std::string>& argv) {
  std::string wanted;
  for (const std::string& a : argv) wanted += a + '\0';
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::stringstream ss;
    ss << cmdline.rdbuf();
    if (ss.str() != wanted) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') continue;
    found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

// Waits up to `wait` for every process with one of `argvs` to be gone;
// returns how many were still running then, after killing them (a failed
// test must not leave them behind).
inline size_t survivors(const std::vector<std::vector<std::string>>& argvs,
                        std::chrono::milliseconds wait = std::chrono::milliseconds(3000)) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::vector<pid_t> left;
    for (const auto& argv : argvs) {
      for (pid_t pid : find_processes(argv)) left.push_back(pid);
    }
    if (left.empty()) return 0;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (pid_t pid : left) ::kill(pid, SIGKILL);
      return left.size();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace carapace::testing
