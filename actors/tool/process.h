// Process: runs one child program to completion under a deadline and captures
// what it printed, for the shell tool.
//
// The child leads a process group of its own, so that a timeout can kill
// everything it started (background jobs, pipelines) with one signal to the
// group. Its stdout and stderr share one pipe, so the captured text keeps the
// order in which the child wrote it. The capture holds at most
// max_output_bytes (the head and the tail of the output) plus one read buffer,
// whatever the child prints.
//
// Thread safety: run_process may be called from several threads at once. It
// blocks the calling thread until the child is gone. While it runs it blocks
// SIGPIPE in the calling thread only (a child that stops reading its stdin
// must not kill the runtime) and restores the thread's signal mask before it
// returns. It never changes process-wide signal dispositions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace carapace {

struct ProcessOptions {
  std::vector<std::string> argv;          // argv[0] is the program; without a '/', it is searched in PATH
  std::string cwd;                        // working directory of the child ("" = the caller's)
  std::string stdin_data;                 // written to the child's stdin, which is then closed
  // The child's environment, "NAME=value" entries; nullopt: the caller's
  // (the shell tool passes one filtered by actors/tool/tool_env.h).
  std::optional<std::vector<std::string>> env;
  uint64_t timeout_ms = 30000;            // 0 (or >= 2^40) = no deadline
  uint64_t max_output_bytes = 64 * 1024;  // cap of ProcessResult::output (see truncate_output)
};

struct ProcessResult {
  bool started = false;       // false: the program could not be started (see error)
  std::string error;          // why it did not start, naming the program
  int exit_code = -1;         // set when the child exited by itself
  int term_signal = 0;        // set when a signal ended the child
  bool timed_out = false;     // the deadline passed and the process group was killed
  std::string output;         // stdout and stderr merged, in order, capped
  uint64_t output_bytes = 0;  // total bytes the child wrote, before the cap
  bool truncated = false;     // output_bytes > max_output_bytes; output has a marker
  uint64_t duration_ms = 0;
};

// Runs options.argv and waits for it. The call ends when the child has exited
// and its output pipe is at EOF. At the deadline it sends SIGKILL to the whole
// process group, reaps the child, and keeps reading for a short grace period
// only: a process that left the group (setsid) may hold the pipe open for
// ever, and the call must not wait for it.
//
// The child gets options.env (else the caller's environment), an empty signal mask, default
// signal dispositions, and no file descriptors of the caller but 0, 1 and 2.
ProcessResult run_process(const ProcessOptions& options);

// The truncation rule of run_process, for text already in memory. When `full`
// is longer than max_bytes, returns its first max_bytes/2 bytes, a marker
//   "\n[... 983,040 bytes truncated: kept 65,536 of 1,048,576 ...]\n"
// and its last max_bytes - max_bytes/2 bytes, so the result is longer than
// max_bytes by the marker's length. A cut that would split a UTF-8 sequence
// moves (by at most 3 bytes) to keep whole characters; the marker counts the
// bytes actually kept. Otherwise returns `full` unchanged. *truncated (may be
// null) says which.
std::string truncate_output(std::string_view full, uint64_t max_bytes, bool* truncated);

}  // namespace carapace
