#include "actors/tool/process/process_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace carapace::process_guard {
namespace {

// Writes one record; a full pipe cannot happen (the runtime reads it), and a
// runtime that is gone cannot read it anyway.
void report(int fd, int32_t kind, int32_t value) {
  Report r{kind, value};
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void fail_setup(int fd, SetupStep step, int err) {
  report(fd, kSetupFailed, step * 65536 + err);
  ::_exit(127);
}

// Resets every signal's disposition (an ignored SIGCHLD would make waitpid
// fail; an ignored SIGINT would survive exec) and sets the mask.
void reset_signals(const sigset_t& mask) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for the reserved real-time ones
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
}

[[noreturn]] void run_worker(const ChildPlan& plan, pid_t guard) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != guard) fail_setup(plan.report_fd, kStepParentGone, ESRCH);
  ::setpgid(0, 0);
  if (::dup2(plan.stdin_fd, STDIN_FILENO) < 0 || ::dup2(plan.output_fd, STDOUT_FILENO) < 0 ||
      ::dup2(plan.stderr_fd >= 0 ? plan.stderr_fd : plan.output_fd, STDERR_FILENO) < 0) {
    fail_setup(plan.report_fd, kStepStdio, errno);
  }
  if (plan.cwd_fd >= 0) {
    if (::fchdir(plan.cwd_fd) != 0) fail_setup(plan.report_fd, kStepChdir, errno);
  } else if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0) {
    fail_setup(plan.report_fd, kStepChdir, errno);
  }
  if (plan.confine != nullptr) {
    if (int err = plan.confine(plan.confine_data); err != 0) fail_setup(plan.report_fd, kStepSandbox, err);
  }
  // Only 0-2 survive the exec (the report pipe until then: it says why an
  // exec failed).
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(plan.path, plan.argv, plan.envp);
  report(plan.report_fd, kExecFailed, errno);
  ::_exit(127);
}

struct SweepState {
  pid_t self;
  int signalled;
};

void kill_if_child(const ProcInfo& info, void* context) {
  auto* state = static_cast<SweepState*>(context);
  if (info.ppid != state->self) return;
  if (::kill(info.pid, SIGKILL) == 0) ++state->signalled;
}

// SIGKILLs every child (own or adopted) until none is left, reaping each.
// Killing a child re-parents its children here, so the scan repeats until
// wait says there are no children at all. /proc is scanned only while live
// children remain: a command that left nothing behind costs no scan.
// Returns the number of processes other than the worker that ended by
// SIGKILL; *worker_status gets the worker's wait status.
int sweep(pid_t worker, int* worker_status) {
  int killed = 0;
  SweepState state{::getpid(), 0};
  auto record = [&](pid_t pid, int status) {
    if (pid == worker) {
      *worker_status = status;
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++killed;
    }
  };
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, __WALL | WNOHANG);
    if (pid > 0) {
      record(pid, status);
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // ECHILD: nothing left
    // Live children: kill them, then wait for one to go (it will: SIGKILL).
    for_each_process(kill_if_child, &state);
    pid = ::waitpid(-1, &status, __WALL);
    if (pid > 0) record(pid, status);
  }
  return killed;
}

bool worker_exited(pid_t worker) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(worker), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == worker;
}

// Reads a small decimal number; -1 if there is none.
long parse_number(const char*& p, const char* end) {
  while (p < end && *p == ' ') ++p;
  if (p == end || *p < '0' || *p > '9') return -1;
  long n = 0;
  while (p < end && *p >= '0' && *p <= '9') n = n * 10 + (*p++ - '0');
  return n;
}

}  // namespace

bool for_each_process(void (*visit)(const ProcInfo& info, void* context), void* context) {
  int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char entries[8192];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, entries, sizeof entries);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      unsigned short reclen;
      __builtin_memcpy(&reclen, entries + at + 16, sizeof reclen);
      const char* name = entries + at + 19;
      at += reclen;
      if (*name < '1' || *name > '9') continue;
      // "/proc/<pid>/stat"
      char path[32] = "/proc/";
      size_t len = 6;
      for (const char* c = name; *c != '\0' && len < 20; ++c) path[len++] = *c;
      const char tail[] = "/stat";
      for (char c : tail) path[len++] = c;
      int fd = ::openat(dir, path + 6, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char stat[512];
      ssize_t got = ::read(fd, stat, sizeof stat);
      ::close(fd);
      if (got <= 0) continue;
      // "pid (comm) state ppid pgrp session ...": comm may hold anything,
      // so parse after the last ')'.
      const char* end = stat + got;
      const char* p = end;
      while (p > stat && *(p - 1) != ')') --p;
      if (p == stat) continue;
      const char* q = stat;
      ProcInfo info{};
      info.pid = static_cast<pid_t>(parse_number(q, end));
      while (p < end && *p == ' ') ++p;
      if (p < end) ++p;  // the state letter
      info.ppid = static_cast<pid_t>(parse_number(p, end));
      info.pgrp = static_cast<pid_t>(parse_number(p, end));
      info.session = static_cast<pid_t>(parse_number(p, end));
      if (info.pid > 0 && info.ppid >= 0 && info.session >= 0) visit(info, context);
    }
  }
  ::close(dir);
  return true;
}

[[noreturn]] void run_guard(const ChildPlan& plan) {
  // SIGTERM and SIGCHLD stay blocked: the guard waits for them with
  // sigwaitinfo, which cannot miss one that arrived before it waited.
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGCHLD);
  reset_signals(waited);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != plan.runtime_pid) fail_setup(plan.report_fd, kStepParentGone, ESRCH);
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The guard is a copy of the runtime, its environment included: other
  // processes of the user (the command) must not read it through /proc.
  ::prctl(PR_SET_DUMPABLE, 0);

  const pid_t guard = ::getpid();
  pid_t worker = ::_Fork();
  if (worker < 0) fail_setup(plan.report_fd, kStepFork, errno);
  if (worker == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    run_worker(plan, guard);
  }
  // The guard keeps nothing but its report pipe: an output pipe held here
  // would never reach end-of-file.
  const int report_fd = plan.report_fd;
  if (report_fd > 0) ::close_range(0, static_cast<unsigned>(report_fd - 1), 0);
  ::close_range(static_cast<unsigned>(report_fd + 1), ~0U, 0);
  report(report_fd, kWorkerPid, worker);

  bool stopped = false;
  while (!worker_exited(worker)) {
    siginfo_t info;
    int sig = ::sigwaitinfo(&waited, &info);
    if (sig == SIGTERM) {
      stopped = true;
      break;
    }
  }
  // The worker is not reaped yet, so its group id is still its own.
  ::kill(-worker, SIGKILL);
  int worker_status = 0;
  int killed = sweep(worker, &worker_status);
  report(report_fd, kStopped, stopped ? 1 : 0);
  report(report_fd, kKilled, killed);
  report(report_fd, kWaitStatus, worker_status);
  ::_exit(0);
}

}  // namespace carapace::process_guard
