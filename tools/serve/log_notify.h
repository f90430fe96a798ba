// LogNotify: tells `carapace serve` when the home's event log may have
// changed (inotify(7)), so that it reads the log then rather than on a
// timer, and an idle server costs nothing.
//
// It watches the log directory for what a writer does there: an append to
// the write-ahead log (IN_MODIFY), a file made, renamed or deleted (flushes,
// compactions), and a file a writer closed (IN_CLOSE_WRITE) — which is also
// how a writer's death shows, when the kernel closes its files. It watches
// the home for the log directory to appear (a home with no log yet) or to
// come back (`carapace repair` moves it aside). Reading the log as a
// secondary opens files read-only, which it does not watch, so the server's
// own reads wake nothing.
//
// Not thread-safe: the server's one thread uses it.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace carapace::web {

class LogNotify {
 public:
  // Watches `home` and `home`/log (which may not exist yet). An error when
  // inotify cannot be used (no inotify, the limit of watches reached).
  static Status open(const std::string& home, std::unique_ptr<LogNotify>* out);
  ~LogNotify();

  // The descriptor to wait on (readable when events are pending).
  int fd() const { return fd_; }

  // Reads every pending event, never blocking; whether any may mean the log
  // changed (a lost event queue counts as a change).
  bool drain();

 private:
  LogNotify(int fd, std::string log_dir) : fd_(fd), log_dir_(std::move(log_dir)) {}
  // Watches the log directory if it exists and is not watched yet; whether it now is.
  bool watch_log();

  int fd_;
  std::string log_dir_;
  int home_wd_ = -1;
  int log_wd_ = -1;
};

}  // namespace carapace::web
