// Runs a program in a child process and waits for it: the torture runner, the
// demo and the crash tests use it to run the real `carapace` binary.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace carapace {

// Runs `binary args...` with stdout and stderr appended to `log_path`; returns
// the wait status (see WIFEXITED, WTERMSIG), or -1 if the process could not be
// forked. `pid_out`, when given, receives the child's pid.
int run_child_process(const std::string& binary, const std::vector<std::string>& args,
                      const std::string& log_path, pid_t* pid_out = nullptr);

// Starts `binary args...` the same way without waiting; the pid, or -1.
pid_t spawn_child_process(const std::string& binary, const std::vector<std::string>& args,
                          const std::string& log_path);

// Waits up to `timeout_ms` for `pid` to end; true (and *status, the wait
// status) if it did, false if it is still running.
bool wait_child_process(pid_t pid, uint64_t timeout_ms, int* status);

}  // namespace carapace
