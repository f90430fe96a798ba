#include "actors/tool/process/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "actors/tool/process/process_guard.h"
#include "base/text.h"
#include "base/unique_fd.h"

extern char** environ;

namespace carapace {
namespace {

using Clock = std::chrono::steady_clock;

// Once the guard is gone, how long to keep reading what is already in the
// pipe. Only a process the guard could not reach (it was killed from
// outside) can hold the pipe open; past this grace the call ends without
// its EOF.
constexpr std::chrono::milliseconds kKillGrace{200};
// A guard told to stop kills and reaps its processes in milliseconds; one
// that has not by then is killed, and the runtime sweeps for it.
constexpr std::chrono::milliseconds kGuardGrace{2000};
// Timeouts this long (about 35 years) mean "none"; the deadline's arithmetic
// would overflow the clock's range well before UINT64_MAX.
constexpr uint64_t kNoDeadlineMs = uint64_t{1} << 40;
constexpr size_t kReadChunk = 64 * 1024;
// When the output is at EOF but the child has not exited, there is no fd to
// wait on; poll its status at this interval.
constexpr int kExitPollMs = 5;

std::string with_thousands(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string join_truncated(std::string_view head, std::string_view tail, uint64_t total) {
  head.remove_suffix(incomplete_utf8_suffix(head));
  tail.remove_prefix(leading_utf8_continuations(tail));
  uint64_t kept = head.size() + tail.size();
  std::string marker = "\n[... " + with_thousands(total - kept) + " bytes truncated: kept " +
                       with_thousands(kept) + " of " + with_thousands(total) + " ...]\n";
  std::string out;
  out.reserve(head.size() + marker.size() + tail.size());
  out.append(head);
  out += marker;
  out.append(tail);
  return out;
}

// Keeps the first max/2 bytes of a stream and a ring of its last max - max/2
// bytes, so memory stays at the cap however much the child prints.
class OutputCapture {
 public:
  explicit OutputCapture(uint64_t max_bytes)
      : head_limit_(max_bytes / 2), tail_limit_(max_bytes - max_bytes / 2) {}

  void append(std::string_view data) {
    total_ += data.size();
    if (head_.size() < head_limit_) {
      size_t n = std::min<uint64_t>(head_limit_ - head_.size(), data.size());
      head_.append(data.substr(0, n));
      data.remove_prefix(n);
    }
    if (data.empty() || tail_limit_ == 0) return;
    if (data.size() > tail_limit_) data.remove_prefix(data.size() - tail_limit_);
    if (ring_.empty()) ring_.resize(tail_limit_);
    while (!data.empty()) {
      size_t n = std::min<size_t>(ring_.size() - pos_, data.size());
      std::memcpy(ring_.data() + pos_, data.data(), n);
      data.remove_prefix(n);
      pos_ = (pos_ + n) % ring_.size();
      filled_ = std::min<size_t>(filled_ + n, ring_.size());
    }
  }

  uint64_t total() const { return total_; }

  std::string finish(bool* truncated) const {
    std::string tail;
    if (filled_ < ring_.size()) {
      tail = ring_.substr(0, filled_);
    } else {
      tail = ring_.substr(pos_) + ring_.substr(0, pos_);
    }
    *truncated = total_ > head_limit_ + tail_limit_;
    if (!*truncated) return head_ + tail;
    return join_truncated(head_, tail, total_);
  }

 private:
  const uint64_t head_limit_;
  const uint64_t tail_limit_;
  uint64_t total_ = 0;
  std::string head_;
  std::string ring_;  // allocated when the head is full
  size_t pos_ = 0;    // next write position in ring_
  size_t filled_ = 0;
};

}  // namespace

// A pipe whose ends are close-on-exec and not among fds 0-2 (a daemon may
// have closed its stdio): the spawn's dup2 onto 0-2 would otherwise clobber
// one end with another.
bool make_pipe(UniqueFd* read_end, UniqueFd* write_end, int* err) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *err = errno;
    return false;
  }
  UniqueFd ends[2] = {UniqueFd(fds[0]), UniqueFd(fds[1])};
  for (UniqueFd& end : ends) {
    if (end.get() > 2) continue;
    int moved = ::fcntl(end.get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) {
      *err = errno;
      return false;
    }
    end.reset(moved);
  }
  read_end->reset(ends[0].release());
  write_end->reset(ends[1].release());
  return true;
}

bool set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

namespace {

// Blocks SIGPIPE in the calling thread: a write to a child that closed its
// stdin then fails with EPIPE instead of killing the runtime. On destruction,
// discards the SIGPIPE such a write left pending and restores the mask.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_mask_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    if (got_epipe_ && !was_pending_) {
      const timespec no_wait{0, 0};
      while (sigtimedwait(&pipe_set_, nullptr, &no_wait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

  void note_epipe() { got_epipe_ = true; }

 private:
  sigset_t pipe_set_;
  sigset_t old_mask_;
  bool was_pending_ = false;
  bool got_epipe_ = false;
};

// Whether the child has exited, without reaping it: while it is a zombie its
// pid, and so the session it leads, cannot be reused, which keeps a late
// kill() from reaching a stranger.
bool child_exited(pid_t pid, bool block) {
  siginfo_t info{};
  int options = WEXITED | WNOWAIT | (block ? 0 : WNOHANG);
  for (;;) {
    info.si_pid = 0;
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, options) == 0) return info.si_pid == pid;
    if (errno != EINTR) return true;  // ECHILD: nothing left to wait for
  }
}

int poll_timeout_ms(Clock::time_point until, Clock::time_point now) {
  if (now >= until) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

std::string spawn_error(const ProcessOptions& options, int err) {
  const std::string& program = options.argv[0];
  std::string where = options.cwd.empty() ? "" : " in '" + options.cwd + "'";
  if (err == ENOENT && program.find('/') == std::string::npos) {
    return "cannot start '" + program + "': no such program in PATH";
  }
  if (err == ENOENT) return "cannot start '" + program + "'" + where + ": no such file";
  if (err == EACCES) {
    return "cannot start '" + program + "'" + where + ": permission denied (is it executable?)";
  }
  return "cannot start '" + program + "'" + where + ": " + errno_text(err);
}

std::string setup_error(const ProcessOptions& options, int32_t value) {
  const std::string& program = options.argv[0];
  int step = value / 65536;
  int err = value % 65536;
  switch (step) {
    case process_guard::kStepChdir:
      return "cannot start '" + program + "': working directory '" + options.cwd + "': " + errno_text(err);
    case process_guard::kStepSandbox:
      return "cannot start '" + program + "': the sandbox could not be applied: " + errno_text(err);
    case process_guard::kStepFork:
      return "cannot start '" + program + "': fork failed: " + errno_text(err);
    case process_guard::kStepParentGone:
      return "cannot start '" + program + "': the runtime thread that started it is gone";
    default:
      return "cannot start '" + program + "': setting up its standard streams failed: " + errno_text(err);
  }
}

}  // namespace

// The path execvp would run for `program`: itself if it holds a '/', else
// the first executable regular file of that name in `path_list`. ENOENT or
// EACCES (found, none executable) otherwise.
int resolve_program(const std::string& program, const std::string& path_list, std::string* resolved) {
  if (program.find('/') != std::string::npos) {
    *resolved = program;
    return 0;
  }
  int err = ENOENT;
  size_t begin = 0;
  for (;;) {
    size_t end = path_list.find(':', begin);
    std::string dir = path_list.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) {
        *resolved = std::move(candidate);
        return 0;
      }
      err = EACCES;
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return err;
}

std::string search_path(const std::optional<std::vector<std::string>>& env) {
  if (env) {
    for (const std::string& entry : *env) {
      if (entry.rfind("PATH=", 0) == 0) return entry.substr(5);
    }
  }
  const char* path = ::getenv("PATH");
  return path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
}

namespace {

// What a guard that died without reporting (SIGKILLed from outside) may have
// left: processes of its session (it was the session leader) or of the
// worker's group. They are killed; those re-parented to this process
// (a child subreaper) are reaped.
struct RemnantScan {
  pid_t self;
  pid_t session;
  pid_t group;
};

void kill_remnant(const process_guard::ProcInfo& info, void* context) {
  auto* scan = static_cast<RemnantScan*>(context);
  bool ours = info.session == scan->session || (scan->group > 0 && info.pgrp == scan->group);
  if (!ours || info.pid == scan->self || info.pid == scan->session) return;
  ::kill(info.pid, SIGKILL);
  if (info.ppid == scan->self) ::waitpid(info.pid, nullptr, 0);
}

// The guard's session (its pid) and the worker's group stay reserved while
// any process is in them, so the numbers cannot name strangers.
void kill_remnants(pid_t guard, pid_t worker) {
  RemnantScan scan{::getpid(), guard, worker};
  process_guard::for_each_process(kill_remnant, &scan);
}

}  // namespace

void kill_guard_remnants(pid_t guard, pid_t worker) { kill_remnants(guard, worker); }

void ProcessSet::terminate_all() {
  std::lock_guard lock(mu_);
  terminating_ = true;
  // A guard is removed before it is reaped, so each pid here is a live
  // process or an unreaped zombie: never someone else's.
  for (const auto& [guard, session] : guards_) ::kill(guard, SIGTERM);
}

void ProcessSet::terminate_session(const std::string& session) {
  std::lock_guard lock(mu_);
  for (const auto& [guard, of] : guards_) {
    if (of == session) ::kill(guard, SIGTERM);
  }
}

bool ProcessSet::terminating() const {
  std::lock_guard lock(mu_);
  return terminating_;
}

size_t ProcessSet::running() const {
  std::lock_guard lock(mu_);
  return guards_.size();
}

bool ProcessSet::add(pid_t guard, const std::string& session) {
  std::lock_guard lock(mu_);
  if (terminating_) return false;
  guards_[guard] = session;
  return true;
}

void ProcessSet::remove(pid_t guard) {
  std::lock_guard lock(mu_);
  guards_.erase(guard);
}

bool become_child_subreaper(std::string* error) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0) return true;
  if (error != nullptr) *error = "cannot become a child subreaper (PR_SET_CHILD_SUBREAPER): " + errno_text(errno);
  return false;
}

std::string truncate_output(std::string_view full, uint64_t max_bytes, bool* truncated) {
  bool cut = full.size() > max_bytes;
  if (truncated != nullptr) *truncated = cut;
  if (!cut) return std::string(full);
  uint64_t head = max_bytes / 2;
  uint64_t tail = max_bytes - head;
  return join_truncated(full.substr(0, head), full.substr(full.size() - tail), full.size());
}

ProcessResult run_process(const ProcessOptions& options) {
  ProcessResult result;
  const Clock::time_point start = Clock::now();
  auto finish = [&] {
    result.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    return result;
  };

  if (options.argv.empty() || options.argv[0].empty()) {
    result.error = "cannot start a process: no program given (argv is empty)";
    return finish();
  }
  const std::string& program = options.argv[0];
  if (!options.cwd.empty() && options.cwd_fd < 0) {
    struct stat st;
    if (::stat(options.cwd.c_str(), &st) != 0) {
      result.error =
          "cannot start '" + program + "': working directory '" + options.cwd + "': " + errno_text(errno);
      return finish();
    }
    if (!S_ISDIR(st.st_mode)) {
      result.error =
          "cannot start '" + program + "': working directory '" + options.cwd + "' is not a directory";
      return finish();
    }
  }
  std::string path;
  if (int err = resolve_program(program, search_path(options.env), &path); err != 0) {
    result.error = spawn_error(options, err);
    return finish();
  }

  UniqueFd in_read, in_write, out_read, out_write, report_read, report_write;
  int err = 0;
  if (!make_pipe(&in_read, &in_write, &err) || !make_pipe(&out_read, &out_write, &err) ||
      !make_pipe(&report_read, &report_write, &err)) {
    result.error = "cannot start '" + program + "': cannot create a pipe: " + errno_text(err);
    return finish();
  }

  // Everything the children read, prepared here: after the fork they may
  // not allocate.
  std::vector<char*> argv;
  argv.reserve(options.argv.size() + 1);
  for (const std::string& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env) {
    envp.reserve(options.env->size() + 1);
    for (const std::string& entry : *options.env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
  }
  process_guard::ChildPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = options.env ? envp.data() : environ;
  plan.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  plan.cwd_fd = options.cwd_fd;
  plan.stdin_fd = in_read.get();
  plan.output_fd = out_write.get();
  plan.report_fd = report_write.get();
  plan.runtime_pid = ::getpid();
  plan.confine = options.confinement.apply;
  plan.confine_data = options.confinement.data;

  if (options.processes != nullptr && options.processes->terminating()) {
    result.error = "cannot start '" + program + "': the runtime is stopping";
    return finish();
  }

  // Blocked before the fork so no write below can raise it; the children set
  // their own masks.
  SigpipeBlock sigpipe;
  const pid_t guard = ::_Fork();
  if (guard < 0) {
    result.error = "cannot start '" + program + "': fork failed: " + errno_text(errno);
    return finish();
  }
  if (guard == 0) process_guard::run_guard(plan);  // never returns

  bool registered = options.processes != nullptr && options.processes->add(guard, options.session);
  if (options.processes != nullptr && !registered) ::kill(guard, SIGTERM);  // stopping meanwhile
  in_read.reset();
  out_write.reset();
  report_write.reset();
  if (options.stdin_data.empty()) in_write.reset();
  if (in_write) set_nonblocking(in_write.get());
  set_nonblocking(out_read.get());
  set_nonblocking(report_read.get());

  OutputCapture capture(options.max_output_bytes);
  std::unique_ptr<char[]> buffer(new char[kReadChunk]);
  std::string reports;  // bytes of the report pipe not yet parsed
  pid_t worker = 0;
  int32_t exec_error = 0, setup_error_value = 0;
  bool have_status = false, guard_stopped = false;
  int wait_status = 0;
  size_t stdin_offset = 0;
  const bool has_deadline = options.timeout_ms > 0 && options.timeout_ms < kNoDeadlineMs;
  const Clock::time_point deadline =
      has_deadline ? start + std::chrono::milliseconds(options.timeout_ms) : start;
  bool guard_exited = false;
  bool terminated = false;  // we sent the guard its SIGTERM
  Clock::time_point terminated_at{};
  bool guard_killed = false;
  bool remnants_killed = false;
  Clock::time_point ended_at{};  // when the guard was first seen gone

  auto parse_reports = [&] {
    size_t at = 0;
    for (; at + sizeof(process_guard::Report) <= reports.size(); at += sizeof(process_guard::Report)) {
      process_guard::Report r;
      std::memcpy(&r, reports.data() + at, sizeof r);
      switch (r.kind) {
        case process_guard::kWorkerPid: worker = r.value; break;
        case process_guard::kSetupFailed: setup_error_value = r.value; break;
        case process_guard::kExecFailed: exec_error = r.value; break;
        case process_guard::kWaitStatus: wait_status = r.value; have_status = true; break;
        case process_guard::kKilled: result.killed_background = static_cast<uint64_t>(r.value); break;
        case process_guard::kStopped: guard_stopped = r.value != 0; break;
        default: break;
      }
    }
    reports.erase(0, at);
  };

  for (;;) {
    Clock::time_point now = Clock::now();
    if (has_deadline && !terminated && now >= deadline) {
      result.timed_out = true;
      terminated = true;
      terminated_at = now;
      ::kill(guard, SIGTERM);
    }
    // A guard that does not finish its sweep in time (it should take
    // milliseconds) is killed; the remnant scan below takes over.
    if (terminated && !guard_exited && !guard_killed && now >= terminated_at + kGuardGrace) {
      guard_killed = true;
      ::kill(guard, SIGKILL);
    }
    // The report pipe closes when the guard exits (the worker's copy is
    // close-on-exec): then the exit is a moment away, so wait for it.
    if (!guard_exited) guard_exited = child_exited(guard, /*block=*/!report_read);
    if (guard_exited) {
      if (ended_at == Clock::time_point{}) ended_at = now;
      // A guard that died without its report left its processes unswept.
      if (!have_status && !report_read && !remnants_killed) {
        kill_remnants(guard, worker);
        remnants_killed = true;
      }
      if (!out_read && !report_read) break;
      // Past this, what holds the output open is out of reach: do not wait for it.
      if (now >= ended_at + kKillGrace) break;
    }

    pollfd fds[3];
    nfds_t nfds = 0;
    int out_index = -1, in_index = -1, report_index = -1;
    if (out_read) {
      out_index = static_cast<int>(nfds);
      fds[nfds++] = pollfd{out_read.get(), POLLIN, 0};
    }
    if (in_write) {
      in_index = static_cast<int>(nfds);
      fds[nfds++] = pollfd{in_write.get(), POLLOUT, 0};
    }
    if (report_read) {
      report_index = static_cast<int>(nfds);
      fds[nfds++] = pollfd{report_read.get(), POLLIN, 0};
    }
    int timeout = -1;
    auto at_most = [&](int ms) { timeout = timeout < 0 ? ms : std::min(timeout, ms); };
    if (has_deadline && !terminated) at_most(poll_timeout_ms(deadline, now));
    if (terminated && !guard_exited) at_most(poll_timeout_ms(terminated_at + kGuardGrace, now));
    if (guard_exited || !report_read) at_most(kExitPollMs);

    int ready = ::poll(fds, nfds, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      // Cannot watch the pipes any more: end the call rather than leave it.
      result.error = "poll failed while running '" + program + "': " + errno_text(errno);
      if (!terminated) {
        terminated = true;
        terminated_at = now;
        ::kill(guard, SIGTERM);
      }
      out_read.reset();
      in_write.reset();
      continue;
    }
    if (out_index >= 0 && (fds[out_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t n = ::read(out_read.get(), buffer.get(), kReadChunk);
      if (n > 0) {
        capture.append(std::string_view(buffer.get(), static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        out_read.reset();
      }
    }
    if (report_index >= 0 && (fds[report_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      char bytes[256];
      ssize_t n = ::read(report_read.get(), bytes, sizeof bytes);
      if (n > 0) {
        reports.append(bytes, static_cast<size_t>(n));
        parse_reports();
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        report_read.reset();
      }
    }
    if (in_index >= 0 && fds[in_index].revents != 0) {
      if ((fds[in_index].revents & POLLOUT) != 0) {
        ssize_t n = ::write(in_write.get(), options.stdin_data.data() + stdin_offset,
                            options.stdin_data.size() - stdin_offset);
        if (n > 0) {
          stdin_offset += static_cast<size_t>(n);
          if (stdin_offset == options.stdin_data.size()) in_write.reset();
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          if (errno == EPIPE) sigpipe.note_epipe();
          in_write.reset();  // the child stopped reading; the rest is dropped
        }
      } else {
        in_write.reset();  // POLLERR / POLLHUP: the read end is closed
      }
    }
  }
  in_write.reset();
  out_read.reset();
  report_read.reset();

  if (!have_status && !remnants_killed) kill_remnants(guard, worker);
  if (options.processes != nullptr && registered) options.processes->remove(guard);
  int guard_status = 0;
  pid_t waited;
  while ((waited = ::waitpid(guard, &guard_status, 0)) < 0 && errno == EINTR) {
  }

  if (setup_error_value != 0) {
    result.error = setup_error(options, setup_error_value);
    return finish();
  }
  if (exec_error != 0) {
    result.error = spawn_error(options, exec_error);
    return finish();
  }
  result.started = true;
  result.stopped = guard_stopped && !result.timed_out;
  if (have_status) {
    if (WIFEXITED(wait_status)) {
      result.exit_code = WEXITSTATUS(wait_status);
    } else if (WIFSIGNALED(wait_status)) {
      result.term_signal = WTERMSIG(wait_status);
    }
  } else if (waited != guard) {
    // ECHILD: the embedding program set SIGCHLD to SIG_IGN, so the kernel
    // reaped the guard and its report may be lost.
    result.error = "the exit status of '" + program + "' is unavailable: " + errno_text(errno);
  } else {
    result.error = "the process guarding '" + program + "' was killed before it reported (" +
                   (WIFSIGNALED(guard_status) ? "signal " + std::to_string(WTERMSIG(guard_status))
                                              : "exit " + std::to_string(WEXITSTATUS(guard_status))) +
                   "); what the program started was killed";
    result.term_signal = SIGKILL;
  }
  result.output_bytes = capture.total();
  result.output = capture.finish(&result.truncated);
  return finish();
}

}  // namespace carapace
