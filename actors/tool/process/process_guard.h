// Process guard: what runs in the two processes run_process forks for one
// call (actors/tool/process/process.h), and the /proc scan both sides use.
//
//   runtime thread ──fork──► guard ──fork──► worker ──exec──► the program
//
// The guard is a session leader and a child subreaper
// (PR_SET_CHILD_SUBREAPER): everything the program starts, daemons that
// double-fork or call setsid included, stays its descendant, and is re-parented
// to it when its own parent dies. When the worker exits, or the guard gets
// SIGTERM (the call's deadline, the runtime stopping, or PR_SET_PDEATHSIG when
// the runtime thread or process dies), it SIGKILLs every descendant it has
// left, reaps them all, reports, and exits. The worker leads a process group
// of its own, dies with the guard (PR_SET_PDEATHSIG SIGKILL), applies the
// call's confinement and execs the program.
//
// Both processes are forked from a multi-threaded program, so they run only
// async-signal-safe code: system calls on memory prepared before the fork.
// Nothing here allocates.
//
// The guard reports to the runtime over a pipe, in 8-byte records (below
// PIPE_BUF, so each is written whole): {kind, value} as two int32.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace carapace::process_guard {

enum ReportKind : int32_t {
  kWorkerPid = 1,     // value: the worker's pid (also its process group id)
  kSetupFailed = 2,   // value: step * 65536 + errno; the program was not started
  kExecFailed = 3,    // value: errno of execve
  kWaitStatus = 4,    // value: the worker's wait status
  kKilled = 5,        // value: how many other descendants were still alive and were killed
  kStopped = 6,       // value: 1 if a SIGTERM (deadline, stop, runtime death) ended the call early
};

// Steps of the worker's setup, for kSetupFailed.
enum SetupStep : int32_t {
  kStepFork = 1,
  kStepParentGone = 2,
  kStepStdio = 3,
  kStepChdir = 4,
  kStepSandbox = 5,
};

struct Report {
  int32_t kind;
  int32_t value;
};

// Everything the children need, prepared by the runtime before the fork.
struct ChildPlan {
  const char* path = nullptr;  // the program, resolved
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;  // null: the runtime's
  int cwd_fd = -1;            // if >= 0, entered with fchdir instead of cwd
  int stdin_fd = -1;          // the child ends of the pipes
  int output_fd = -1;         // stdout, and stderr unless stderr_fd is set
  int stderr_fd = -1;         // if >= 0: stderr goes here instead (an MCP server's log)
  int report_fd = -1;         // close-on-exec write end of the report pipe
  pid_t runtime_pid = 0;      // the process that forked the guard
  // Called in the worker after its stdio and cwd are set, before exec; must be
  // async-signal-safe. Returns 0, or an errno (reported as kStepSandbox).
  int (*confine)(const void* data) = nullptr;
  const void* confine_data = nullptr;
};

// The guard's body: never returns. Call it in the child of a fork.
[[noreturn]] void run_guard(const ChildPlan& plan);

// A process as /proc/<pid>/stat tells it.
struct ProcInfo {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  pid_t session;
};

// Calls visit(info, context) for every process /proc lists now (processes
// come and go meanwhile; one that vanished is skipped). Async-signal-safe; no
// allocation. Returns false if /proc cannot be read.
bool for_each_process(void (*visit)(const ProcInfo& info, void* context), void* context);

}  // namespace carapace::process_guard
