#include "actors/tool/process/sandbox.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "actors/tool/process/scratch_dir.h"
#include "actors/tool/workspace.h"
#include "base/text.h"

namespace carapace {
namespace {

// The Landlock ABI as the kernel defines it (uapi/linux/landlock.h). Debian
// 12's headers stop at ABI 2, so the later fields and rights are spelled out
// here; the kernel reports the ABI it speaks and only that much is used.
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;  // ABI 4
  uint64_t scoped = 0;              // ABI 6
};
constexpr uint64_t kFsExecute = 1ULL << 0;
constexpr uint64_t kFsWriteFile = 1ULL << 1;
constexpr uint64_t kFsReadFile = 1ULL << 2;
constexpr uint64_t kFsReadDir = 1ULL << 3;
constexpr uint64_t kFsAbi1 = (1ULL << 13) - 1;  // execute .. make_sym
constexpr uint64_t kFsRefer = 1ULL << 13;       // ABI 2
constexpr uint64_t kFsTruncate = 1ULL << 14;    // ABI 3
constexpr uint64_t kFsIoctlDev = 1ULL << 15;    // ABI 5
constexpr uint64_t kFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;
constexpr uint64_t kNetBindTcp = 1ULL << 0;     // ABI 4
constexpr uint64_t kNetConnectTcp = 1ULL << 1;  // ABI 4
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6

uint64_t fs_rights(int abi) {
  uint64_t rights = kFsAbi1;
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

int probe_landlock(std::string* note) {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi > 0) return static_cast<int>(abi);
  if (errno == ENOSYS) {
    *note = "this kernel has no Landlock (CONFIG_SECURITY_LANDLOCK is off)";
  } else if (errno == EOPNOTSUPP) {
    *note = "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)";
  } else {
    *note = "Landlock cannot be used: " + errno_text(errno);
  }
  return 0;
}

// Where this process's initial environment strings lie (/proc/self/stat
// fields 50 and 51): a forked child wipes its copy before it lets other
// processes of its user read it.
struct Region {
  uintptr_t start = 0;
  uintptr_t end = 0;
};

Region initial_environment() {
  static const Region region = [] {
    Region r;
    int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return r;
    char buf[2048];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return r;
    std::string text(buf, static_cast<size_t>(n));
    size_t at = text.rfind(')');
    if (at == std::string::npos) return r;
    // Fields from 3 on follow the ')'; env_start is field 50.
    std::vector<std::string> fields;
    size_t begin = at + 2;
    while (begin < text.size()) {
      size_t end = text.find(' ', begin);
      if (end == std::string::npos) end = text.size();
      fields.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
    if (fields.size() < 49) return r;
    r.start = std::strtoull(fields[47].c_str(), nullptr, 10);
    r.end = std::strtoull(fields[48].c_str(), nullptr, 10);
    if (r.end <= r.start) r = Region{};
    return r;
  }();
  return region;
}

// Enters a network namespace: directly when this process may, else inside a
// user namespace (the child is single-threaded, as unshare(CLONE_NEWUSER)
// requires). Returns 0 or an errno. Async-signal-safe.
int enter_network_namespace(const char* uid_map, const char* gid_map, Region secrets) {
  if (::unshare(CLONE_NEWNET) == 0) return 0;
  if (errno != EPERM) return errno;
  // Writing our own uid_map needs /proc/self to be ours, that is, this
  // process dumpable; it is a copy of the runtime, which is not. Wipe the
  // copy of the runtime's environment first (exec replaces the rest).
  if (secrets.end > secrets.start) {
    volatile char* p = reinterpret_cast<volatile char*>(secrets.start);
    for (uintptr_t i = 0; i < secrets.end - secrets.start; ++i) p[i] = 0;
  }
  if (::prctl(PR_SET_DUMPABLE, 1) != 0) return errno;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return errno;
  // Map this user (and group) to itself, so files keep their owners.
  struct {
    const char* path;
    const char* text;
  } writes[] = {{"/proc/self/setgroups", "deny"}, {"/proc/self/uid_map", uid_map}, {"/proc/self/gid_map", gid_map}};
  for (const auto& w : writes) {
    int fd = ::open(w.path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t len = 0;
    while (w.text[len] != '\0') ++len;
    ssize_t n = ::write(fd, w.text, len);
    int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
    ::close(fd);
    if (err != 0) return err;
  }
  return 0;
}

// Drops every capability, for good (bounding set, then the sets): root in
// the sandbox is then a user like any other, whose files Landlock confines,
// and cannot read the memory or environment of a non-dumpable runtime
// (/proc/<pid>/environ needs CAP_SYS_PTRACE then). An unprivileged process
// has none to drop, and no_new_privs keeps exec from granting any.
int drop_capabilities() {
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the last capability
      if (errno == EPERM) break;   // no CAP_SETPCAP: nothing in the sets to drop
      return errno;
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) return errno;
  return 0;
}

std::string id_map(unsigned id) { return std::to_string(id) + " " + std::to_string(id) + " 1\n"; }

bool probe_network_namespace(std::string* note) {
  const std::string uid_map = id_map(::geteuid()), gid_map = id_map(::getegid());
  pid_t pid = ::_Fork();
  if (pid < 0) {
    *note = "cannot probe network namespaces: fork failed: " + errno_text(errno);
    return false;
  }
  if (pid == 0) ::_exit(enter_network_namespace(uid_map.c_str(), gid_map.c_str(), Region{}) == 0 ? 0 : 1);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  *note = "network namespaces are not available to this user (neither CAP_SYS_ADMIN nor unprivileged user "
          "namespaces: see the sysctl kernel.unprivileged_userns_clone)";
  return false;
}

Status check_paths(const std::vector<std::string>& paths, const char* key) {
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    const std::string& p = paths[i];
    if (p.empty() || p[0] != '/') {
      return Status::invalid_argument(where + " \"" + p + "\" must be an absolute path");
    }
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) {
      return Status::invalid_argument(where + " \"" + p + "\" cannot be used: " + errno_text(errno));
    }
  }
  return Status::ok_status();
}

// Adds a rule granting `rights` beneath `path` (a file gets its file rights
// only). 0 or an errno.
int add_path_rule(int ruleset, const char* path, uint64_t rights, uint64_t handled) {
  int fd = ::open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else {
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights & handled & (S_ISDIR(st.st_mode) ? ~0ULL : kFileRights);
    rule.parent_fd = fd;
    if (rule.allowed_access != 0 &&
        ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
      err = errno;
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

const SandboxSupport& sandbox_support() {
  static const SandboxSupport support = [] {
    SandboxSupport s;
    s.landlock_abi = probe_landlock(&s.landlock_note);
    s.network_namespace = probe_network_namespace(&s.network_note);
    return s;
  }();
  return support;
}

Status plan_sandbox(const SandboxOptions& options, const SandboxSupport& support, SandboxPlan* plan,
                    std::vector<std::string>* warnings) {
  const std::string& mode = options.mode;
  if (mode != "auto" && mode != "off" && mode != "workspace-write" && mode != "read-only") {
    return Status::invalid_argument("tools.sandbox \"" + mode +
                                    "\" must be \"auto\", \"off\", \"workspace-write\" or \"read-only\"");
  }
  if (options.network != "on" && options.network != "off") {
    return Status::invalid_argument("tools.network \"" + options.network + "\" must be \"on\" or \"off\"");
  }
  CARAPACE_RETURN_IF_ERROR(check_paths(options.readable, "tools.sandbox_readable"));
  CARAPACE_RETURN_IF_ERROR(check_paths(options.writable, "tools.sandbox_writable"));
  SandboxPlan p;
  p.landlock_abi = support.landlock_abi;
  if (mode == "auto") {
    p.mode = support.landlock_abi > 0 ? "workspace-write" : "off";
    if (support.landlock_abi == 0 && warnings != nullptr) {
      warnings->push_back("tools.sandbox: " + support.landlock_note +
                          "; shell commands run without a file-system sandbox (they can write wherever this "
                          "user can). Set tools.sandbox to \"off\" to say that is intended (docs/sandbox.md)");
    }
  } else {
    p.mode = mode;
    if (mode != "off" && support.landlock_abi == 0) {
      return Status::unsupported("tools.sandbox is \"" + mode + "\" but " + support.landlock_note +
                                 "; set tools.sandbox to \"off\" to run shell commands unconfined (docs/sandbox.md)");
    }
  }
  if (options.network == "off") {
    p.network_off = true;
    p.network_namespace = support.network_namespace;
    if (!support.network_namespace) {
      if (support.landlock_abi < 4) {
        return Status::unsupported("tools.network is \"off\" but " + support.network_note +
                                   ", and Landlock's TCP rules need Landlock ABI 4 (this kernel: " +
                                   std::to_string(support.landlock_abi) + "); set tools.network to \"on\"");
      }
      if (warnings != nullptr) {
        warnings->push_back("tools.network: " + support.network_note +
                            "; the network is cut by Landlock's TCP rules only: UDP and Unix sockets still work "
                            "(docs/sandbox.md)");
      }
    }
  }
  *plan = p;
  return Status::ok_status();
}

std::string describe_sandbox(const SandboxPlan& plan) {
  std::string text;
  if (plan.mode == "workspace-write") {
    text = "Commands run in a sandbox: they can read the file system but write only inside the workspace and "
           "$TMPDIR (a scratch directory emptied after each call); other writes fail with \"Permission denied\".";
  } else if (plan.mode == "read-only") {
    text = "Commands run in a read-only sandbox: they can read the file system and write only in $TMPDIR (a "
           "scratch directory emptied after each call), not in the workspace.";
  }
  if (plan.network_off) text += std::string(text.empty() ? "" : " ") + "There is no network.";
  return text;
}

Status CallSandbox::create(const SandboxPlan& plan, const SandboxOptions& options, const WorkspaceRoot& workspace,
                           std::unique_ptr<CallSandbox>* out) {
  std::unique_ptr<CallSandbox> sandbox(new CallSandbox());
  CARAPACE_RETURN_IF_ERROR(make_scratch_dir(scratch_base(), &sandbox->scratch_));
  sandbox->network_namespace_ = plan.network_off && plan.network_namespace;
  sandbox->drop_capabilities_ = plan.mode != "off";
  sandbox->uid_map_ = id_map(::geteuid());
  sandbox->environment_start_ = initial_environment().start;
  sandbox->environment_end_ = initial_environment().end;
  sandbox->gid_map_ = id_map(::getegid());

  const int abi = plan.landlock_abi;
  const bool confine_fs = plan.mode != "off";
  const bool confine_tcp = plan.network_off && abi >= 4;
  if (!confine_fs && !confine_tcp) {
    *out = std::move(sandbox);
    return Status::ok_status();
  }
  RulesetAttr attr;
  size_t attr_size = sizeof(uint64_t);
  if (confine_fs) attr.handled_access_fs = fs_rights(abi);
  if (abi >= 4) attr_size = 2 * sizeof(uint64_t);
  if (confine_tcp) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (confine_fs && abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof attr;
  }
  long ruleset = ::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0) return Status::io_error("cannot create the Landlock ruleset: " + errno_text(errno));
  sandbox->ruleset_fd_ = static_cast<int>(ruleset);
  if (!confine_fs) {
    *out = std::move(sandbox);
    return Status::ok_status();
  }

  const uint64_t handled = attr.handled_access_fs;
  const uint64_t read = kFsExecute | kFsReadFile | kFsReadDir;
  auto add = [&](const std::string& path, uint64_t rights) -> Status {
    if (int err = add_path_rule(sandbox->ruleset_fd_, path.c_str(), rights, handled); err != 0) {
      return Status::io_error("cannot add the Landlock rule for " + path + ": " + errno_text(err));
    }
    return Status::ok_status();
  };
  for (const std::string& path : options.readable) CARAPACE_RETURN_IF_ERROR(add(path, read));
  for (const std::string& path : options.writable) CARAPACE_RETURN_IF_ERROR(add(path, handled));
  // Redirections to /dev/null and friends are everyday shell.
  for (const char* device : {"/dev/null", "/dev/zero", "/dev/full"}) {
    CARAPACE_RETURN_IF_ERROR(add(device, kFsReadFile | kFsWriteFile | kFsTruncate | kFsIoctlDev));
  }
  CARAPACE_RETURN_IF_ERROR(add(workspace.path(), plan.mode == "read-only" ? read : handled));
  CARAPACE_RETURN_IF_ERROR(add(sandbox->scratch_, handled));
  *out = std::move(sandbox);
  return Status::ok_status();
}

CallSandbox::~CallSandbox() {
  if (ruleset_fd_ >= 0) ::close(ruleset_fd_);
  if (!scratch_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);  // removes links, never follows them
  }
}

int CallSandbox::apply(const void* data) {
  const auto* self = static_cast<const CallSandbox*>(data);
  if (self->network_namespace_) {
    Region secrets{self->environment_start_, self->environment_end_};
    if (int err = enter_network_namespace(self->uid_map_.c_str(), self->gid_map_.c_str(), secrets); err != 0) {
      return err;
    }
  }
  if (self->ruleset_fd_ >= 0) {
    // Required by landlock_restrict_self without CAP_SYS_ADMIN; also makes
    // exec ignore setuid bits.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    if (::syscall(SYS_landlock_restrict_self, self->ruleset_fd_, 0) != 0) return errno;
  }
  if (self->drop_capabilities_) return drop_capabilities();
  return 0;
}

}  // namespace carapace
