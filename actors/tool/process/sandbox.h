// Sandbox: the confinement of a shell command (docs/sandbox.md).
//
// With the file-system sandbox on, each command runs under Landlock, applied
// in the forked child before exec (actors/tool/process/process_guard.h): it may
// write only inside the workspace and a scratch directory made for the call
// (its TMPDIR, removed afterwards), plus any `writable` paths; it may read and
// execute only under the `readable` paths (default: "/"). In read-only mode
// the workspace is readable only. With Landlock ABI 6 the command also cannot
// signal processes outside its sandbox (the runtime, its guard) or connect to
// abstract Unix sockets made outside it. With the network off, the command
// runs in a network namespace of its own with no interface up (entered
// directly when the runtime may, else inside a user namespace that maps its
// own user), and, from Landlock ABI 4, cannot bind or connect TCP sockets.
//
// A sandboxed command also loses every capability (root in the sandbox is a
// plain user whose files Landlock confines) and gets no_new_privs (exec
// grants no setuid or file capabilities).
//
// Neither stops what is reachable through the file system by other means: a
// Unix socket file (a daemon listening on one acts for the command), a
// writable file descriptor the command inherits (it gets only 0-2, pipes), or
// a setuid program (no_new_privs makes exec ignore setuid bits). Blocked
// command patterns are a courtesy check, not part of the sandbox.
//
// Modes: "auto" (the default: "workspace-write" where Landlock is available,
// else "off" with a warning), "off", "workspace-write", "read-only". An
// explicit mode or `network: off` that the kernel cannot enforce is an error
// when the runtime starts, never a silent downgrade.
//
// Thread safety: options and support are plain values; sandbox_support() is
// computed once and thread-safe; a CallSandbox belongs to one call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/tool/process/process.h"
#include "base/status.h"

namespace carapace {

class WorkspaceRoot;

struct SandboxOptions {
  std::string mode = "auto";     // auto | off | workspace-write | read-only
  std::string network = "on";    // on | off
  std::vector<std::string> readable = {"/"};  // absolute paths readable and executable
  std::vector<std::string> writable;          // absolute paths writable besides the workspace and scratch
};

// What this kernel offers, probed once per process.
struct SandboxSupport {
  int landlock_abi = 0;       // 0: no Landlock
  std::string landlock_note;  // why not, when 0
  bool network_namespace = false;  // a child can enter a network namespace of its own
  std::string network_note;        // why not, when false
};
const SandboxSupport& sandbox_support();

// The sandbox a call gets under `options` on a kernel with `support`:
// `mode` with "auto" settled, and whether the network is cut.
struct SandboxPlan {
  std::string mode = "off";  // off | workspace-write | read-only
  bool network_off = false;
  bool network_namespace = false;  // cut by a namespace (else by Landlock's TCP rules only)
  int landlock_abi = 0;
};

// OK, or invalid_argument naming the bad value (an unknown mode, a relative
// or missing path), or unsupported saying what the kernel lacks for an
// explicit mode or network off. *warnings gets what a user should know (auto
// settled to off; the network cut by Landlock TCP rules only).
Status plan_sandbox(const SandboxOptions& options, const SandboxSupport& support, SandboxPlan* plan,
                    std::vector<std::string>* warnings);

// One sentence for the shell tool's description: what a command may do.
std::string describe_sandbox(const SandboxPlan& plan);

// One call's sandbox: its scratch directory and its Landlock ruleset. The
// destructor removes the scratch directory (call it once every process of
// the call is gone) and closes the ruleset.
class CallSandbox {
 public:
  // Makes the scratch directory (under the runtime's TMPDIR, else /tmp) and
  // the ruleset for `workspace`. Errors name what failed.
  static Status create(const SandboxPlan& plan, const SandboxOptions& options, const WorkspaceRoot& workspace,
                       std::unique_ptr<CallSandbox>* out);
  ~CallSandbox();
  CallSandbox(const CallSandbox&) = delete;
  CallSandbox& operator=(const CallSandbox&) = delete;

  const std::string& scratch_dir() const { return scratch_; }
  // For ProcessOptions::confinement; valid while this object lives.
  ProcessConfinement confinement() const { return ProcessConfinement{&CallSandbox::apply, this}; }

 private:
  CallSandbox() = default;
  // In the forked child: the network namespace, no_new_privs, Landlock.
  // Async-signal-safe; 0 or an errno.
  static int apply(const void* self);

  std::string scratch_;
  int ruleset_fd_ = -1;
  bool network_namespace_ = false;
  bool drop_capabilities_ = false;
  // For a user namespace, prepared here: the child may not format text.
  std::string uid_map_;
  std::string gid_map_;
  uintptr_t environment_start_ = 0;  // the runtime's initial environment, wiped in the child
  uintptr_t environment_end_ = 0;
};

}  // namespace carapace
