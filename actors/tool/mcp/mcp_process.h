// McpProcess: the program of one MCP server, kept running while the server
// is in use, with its stdin, stdout and stderr on pipes of their own.
//
// It runs under a guard process like a shell command (actors/tool/process/process.h,
// process_guard.h): the server leads a process group of its own; the guard
// is a session leader and child subreaper, so whatever the server starts
// stays its descendant and is killed with it; the guard dies with the thread
// that started it (PR_SET_PDEATHSIG), so a runtime killed with SIGKILL takes
// its servers with it. The optional confinement (the shell's sandbox,
// actors/tool/process/sandbox.h) is applied in the server's process before exec.
//
// Stopping, in order: close_stdin() (a well-behaved server exits), then
// terminate() (SIGTERM to the server), then kill_all() (the guard SIGKILLs
// the server and every process it started, and reaps them); the owner
// reaps the guard with reap(). The destructor does kill_all() and reap().
//
// Thread safety: one thread owns an McpProcess (the client's I/O thread),
// and it must be the thread that called start(): the guard dies with it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "actors/tool/process/process.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace carapace {

struct McpProcessOptions {
  std::vector<std::string> argv;   // argv[0] is the program; without a '/', searched in env's PATH
  std::string cwd;                 // working directory (must exist)
  std::vector<std::string> env;    // "NAME=value": the whole environment of the server
  ProcessConfinement confinement;  // applied before exec (none by default)
};

class McpProcess {
 public:
  // Starts the program; errors name it and say why (no such program, a bad
  // working directory, fork failure). An exec failure is reported later, as
  // the process's exit (exit_description()).
  static Status start(const McpProcessOptions& options, std::unique_ptr<McpProcess>* out);
  ~McpProcess();
  McpProcess(const McpProcess&) = delete;
  McpProcess& operator=(const McpProcess&) = delete;

  // Non-blocking ends of the server's stdin, stdout and stderr (-1 once closed).
  int stdin_fd() const { return stdin_.get(); }
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }
  // Readable when the guard reports; read_reports() reads it.
  int report_fd() const { return report_.get(); }

  void close_stdin() { stdin_.reset(); }
  void close_stdout() { stdout_.reset(); }
  void close_stderr() { stderr_.reset(); }

  // Reads what the guard reported. True once the guard has exited (the
  // server and everything it started are gone): then call reap().
  bool read_reports();
  bool gone() const { return gone_; }
  // "exited with status 1", "was killed by signal 9", "could not be
  // started: ..." (after gone()).
  std::string exit_description() const;

  void terminate();  // SIGTERM to the server's process group
  void kill_all();   // SIGTERM to the guard, which SIGKILLs everything
  void reap();       // waits for the guard (after gone(), or kill_all())

  pid_t pid() const { return worker_; }
  pid_t guard_pid() const { return guard_; }

 private:
  McpProcess() = default;

  pid_t guard_ = -1;
  pid_t worker_ = 0;
  bool reaped_ = false;
  bool gone_ = false;
  bool have_status_ = false;
  int wait_status_ = 0;
  int exec_error_ = 0;
  int setup_error_ = 0;
  std::string program_;
  std::string reports_;
  UniqueFd stdin_, stdout_, stderr_, report_;
};

}  // namespace carapace
