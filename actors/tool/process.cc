#include "actors/tool/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "base/text.h"

extern char** environ;

namespace carapace {
namespace {

using Clock = std::chrono::steady_clock;

// After the kill, how long to keep reading what is already in the pipe. A
// process that escaped the group can hold the pipe open for ever; past this
// grace the call ends without its EOF.
constexpr std::chrono::milliseconds kKillGrace{200};
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

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

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
// pid, and so its process group id, cannot be reused, which keeps a late
// kill(-pid) from reaching an unrelated group.
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

struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

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
  if (!options.cwd.empty()) {
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

  UniqueFd in_read, in_write, out_read, out_write;
  int err = 0;
  if (!make_pipe(&in_read, &in_write, &err) || !make_pipe(&out_read, &out_write, &err)) {
    result.error = "cannot start '" + program + "': cannot create a pipe: " + errno_text(err);
    return finish();
  }

  SpawnSetup setup;
  posix_spawn_file_actions_adddup2(&setup.actions, in_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), STDERR_FILENO);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, options.cwd.c_str());
  // Our own fds are close-on-exec; this also covers fds that other code in
  // the runtime opened without O_CLOEXEC.
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);

  sigset_t no_signals, all_signals;
  sigemptyset(&no_signals);
  sigfillset(&all_signals);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);  // a new group, led by the child
  posix_spawnattr_setsigmask(&setup.attr, &no_signals);
  posix_spawnattr_setsigdefault(&setup.attr, &all_signals);

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

  // Blocked before the spawn so no write below can raise it; the child's mask
  // is set explicitly above and does not inherit this.
  SigpipeBlock sigpipe;
  pid_t pid = -1;
  int spawn_rc = posix_spawnp(&pid, program.c_str(), &setup.actions, &setup.attr, argv.data(),
                              options.env ? envp.data() : environ);
  if (spawn_rc != 0) {
    result.error = spawn_error(options, spawn_rc);
    return finish();
  }
  result.started = true;
  in_read.reset();
  out_write.reset();
  if (options.stdin_data.empty()) in_write.reset();
  if (in_write) set_nonblocking(in_write.get());
  set_nonblocking(out_read.get());

  OutputCapture capture(options.max_output_bytes);
  std::unique_ptr<char[]> buffer(new char[kReadChunk]);
  size_t stdin_offset = 0;
  const bool has_deadline = options.timeout_ms > 0 && options.timeout_ms < kNoDeadlineMs;
  const Clock::time_point deadline =
      has_deadline ? start + std::chrono::milliseconds(options.timeout_ms) : start;
  bool exited = false;
  bool killed = false;

  auto kill_group = [&] {
    killed = true;
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);  // in case the child moved itself to another group
  };

  for (;;) {
    Clock::time_point now = Clock::now();
    if (has_deadline && !killed && now >= deadline) {
      result.timed_out = true;
      kill_group();
    }
    if (!exited) exited = child_exited(pid, /*block=*/killed);
    if (!out_read && exited) break;
    if (killed && exited && now >= deadline + kKillGrace) break;

    pollfd fds[2];
    nfds_t nfds = 0;
    int out_index = -1, in_index = -1;
    if (out_read) {
      out_index = static_cast<int>(nfds);
      fds[nfds++] = pollfd{out_read.get(), POLLIN, 0};
    }
    if (in_write) {
      in_index = static_cast<int>(nfds);
      fds[nfds++] = pollfd{in_write.get(), POLLOUT, 0};
    }
    int timeout = -1;
    if (has_deadline) timeout = poll_timeout_ms(killed ? deadline + kKillGrace : deadline, now);
    if (!out_read) timeout = timeout < 0 ? kExitPollMs : std::min(timeout, kExitPollMs);

    int ready = ::poll(fds, nfds, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      // Cannot watch the pipes any more: end the child rather than leave it.
      result.error = "poll failed while running '" + program + "': " + errno_text(errno);
      if (!killed) kill_group();
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

  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited != pid) {
    // ECHILD: the embedding program set SIGCHLD to SIG_IGN, so the kernel
    // reaped the child and its status is gone.
    result.error = "the exit status of '" + program + "' is unavailable: " + errno_text(errno);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  result.output_bytes = capture.total();
  result.output = capture.finish(&result.truncated);
  return finish();
}

}  // namespace carapace
