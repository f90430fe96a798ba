// Process: runs one child program to completion under a deadline and captures
// what it printed, for the shell tool and command hooks; and makes sure that
// nothing the program started outlives the call.
//
// Each call forks a guard process (actors/tool/process/process_guard.h), a session
// leader and child subreaper, which forks the worker that execs the program.
// Whatever the program starts, a `nohup cmd &`, a `setsid cmd &` or a
// double-forked daemon, stays a descendant of the guard; when the program
// exits, or at the deadline, the guard kills and reaps every one of them. The
// guard dies with the thread that started it (PR_SET_PDEATHSIG), which makes
// it kill everything first; so a SIGKILL of the runtime also ends its calls.
// A ProcessSet lets a runtime stop every call it has running.
//
// The program's stdout and stderr share one pipe, so the captured text keeps
// the order in which it wrote them. The capture holds at most
// max_output_bytes (the head and the tail of the output) plus one read buffer,
// whatever the program prints.
//
// Thread safety: run_process may be called from several threads at once. It
// blocks the calling thread until the guard is gone. While it runs it blocks
// SIGPIPE in the calling thread only (a child that stops reading its stdin
// must not kill the runtime) and restores the thread's signal mask before it
// returns. It never changes process-wide signal dispositions. ProcessSet is
// thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace carapace {

// The calls a runtime has running, so that it can stop them all when it
// stops (or is told to by SIGTERM).
class ProcessSet {
 public:
  ProcessSet() = default;
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  // Ends every running call (the program and everything it started are
  // killed; the call returns with ProcessResult::stopped) and refuses calls
  // from now on. Returns at once; the calls return shortly after.
  void terminate_all();
  bool terminating() const;
  size_t running() const;

  // Ends the running calls of one session (Runtime::stop) as terminate_all
  // does; calls go on being taken.
  void terminate_session(const std::string& session);

  // For run_process: false (and nothing recorded) when terminating.
  bool add(pid_t guard, const std::string& session = "");
  void remove(pid_t guard);

 private:
  mutable std::mutex mu_;
  bool terminating_ = false;
  std::map<pid_t, std::string> guards_;  // guard -> the session of its call
};

// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER): orphans of
// the processes it starts are re-parented to it rather than to init, where
// run_process's fallback can still find them. An error names the reason.
// Idempotent.
bool become_child_subreaper(std::string* error);

// Hooks into the worker before exec (the sandbox, actors/tool/process/sandbox.h):
// called in the forked child, async-signal-safe; returns 0 or an errno.
struct ProcessConfinement {
  int (*apply)(const void* data) = nullptr;
  const void* data = nullptr;
};

struct ProcessOptions {
  std::vector<std::string> argv;          // argv[0] is the program; without a '/', it is searched in PATH
  std::string cwd;                        // working directory of the child ("" = the caller's)
  int cwd_fd = -1;                        // if >= 0: entered with fchdir instead (cwd names it in messages)
  std::string stdin_data;                 // written to the child's stdin, which is then closed
  // The child's environment, "NAME=value" entries; nullopt: the caller's
  // (the shell tool passes one filtered by actors/tool/process/tool_env.h).
  std::optional<std::vector<std::string>> env;
  uint64_t timeout_ms = 30000;            // 0 (or >= 2^40) = no deadline
  uint64_t max_output_bytes = 64 * 1024;  // cap of ProcessResult::output (see truncate_output)
  ProcessSet* processes = nullptr;        // registers the call there while it runs (may be null)
  std::string session;                    // the session of the call, for ProcessSet::terminate_session
  ProcessConfinement confinement;         // applied in the child before exec (none by default)
};

struct ProcessResult {
  bool started = false;       // false: the program could not be started (see error)
  std::string error;          // why it did not start, naming the program
  int exit_code = -1;         // set when the child exited by itself
  int term_signal = 0;        // set when a signal ended the child
  bool timed_out = false;     // the deadline passed and everything the call started was killed
  bool stopped = false;       // ProcessSet::terminate_all (or a SIGTERM to the guard) ended it early
  uint64_t killed_background = 0;  // descendants still running when the program ended, then killed
  std::string output;         // stdout and stderr merged, in order, capped
  uint64_t output_bytes = 0;  // total bytes the child wrote, before the cap
  bool truncated = false;     // output_bytes > max_output_bytes; output has a marker
  uint64_t duration_ms = 0;
};

// Runs options.argv and waits for it. The call ends when the program has
// exited and every process it started has been killed and reaped, or at the
// deadline, when they are all killed at once. Its result says how the program
// ended and how many of its descendants were still running and were killed.
//
// The program gets options.env (else the caller's environment), an empty
// signal mask, default signal dispositions, no file descriptors of the caller
// but 0, 1 and 2, a process group of its own, and PR_SET_PDEATHSIG SIGKILL.
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

class UniqueFd;

// Helpers shared with other long-lived children (actors/tool/mcp/mcp_process.h).

// A pipe whose ends are close-on-exec and not among fds 0-2; false with
// *err set if it cannot be made.
bool make_pipe(UniqueFd* read_end, UniqueFd* write_end, int* err);
bool set_nonblocking(int fd);
// The path execvp would run for `program`: itself if it holds a '/', else
// the first executable regular file of that name in `path_list`; 0, or
// ENOENT / EACCES.
int resolve_program(const std::string& program, const std::string& path_list, std::string* resolved);
// What a guard that died without its report (SIGKILLed from outside) left:
// the processes of its session and of the worker's group are killed, and
// those re-parented to this process (a child subreaper) reaped. Call it
// before reaping the guard, whose pid keeps those numbers reserved.
void kill_guard_remnants(pid_t guard, pid_t worker);
// PATH as a program with environment `env` sees it (else the caller's,
// else the default).
std::string search_path(const std::optional<std::vector<std::string>>& env);

}  // namespace carapace
