#include "tools/serve/log_notify.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/text.h"

namespace carapace::web {
namespace {

constexpr uint32_t kLogEvents = IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr uint32_t kHomeEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;

}  // namespace

Status LogNotify::open(const std::string& home, std::unique_ptr<LogNotify>* out) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::io_error("inotify_init1: " + errno_text(errno));
  std::unique_ptr<LogNotify> notify(new LogNotify(fd, home + "/log"));
  notify->home_wd_ = ::inotify_add_watch(fd, home.c_str(), kHomeEvents);
  if (notify->home_wd_ < 0) return Status::io_error("inotify_add_watch " + home + ": " + errno_text(errno));
  if (!notify->watch_log() && errno != ENOENT) {
    return Status::io_error("inotify_add_watch " + notify->log_dir_ + ": " + errno_text(errno));
  }
  *out = std::move(notify);
  return Status();
}

LogNotify::~LogNotify() { ::close(fd_); }

bool LogNotify::watch_log() {
  if (log_wd_ >= 0) return true;
  log_wd_ = ::inotify_add_watch(fd_, log_dir_.c_str(), kLogEvents);
  return log_wd_ >= 0;
}

bool LogNotify::drain() {
  bool changed = false;
  alignas(struct inotify_event) char buf[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: nothing more pending
    for (char* at = buf; at < buf + n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(at);
      at += sizeof(struct inotify_event) + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        changed = true;  // events were lost: read the log to be sure
      } else if (ev->wd == home_wd_) {
        // Only the log directory's own comings and goings matter here.
        if (ev->len == 0 || std::strcmp(ev->name, "log") != 0) continue;
        changed = true;
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
          if (log_wd_ >= 0) ::inotify_rm_watch(fd_, log_wd_);
          log_wd_ = -1;
        }
      } else if (ev->wd == log_wd_) {
        changed = true;
        if (ev->mask & IN_IGNORED) log_wd_ = -1;  // the directory went
      }
    }
  }
  // The log directory may have appeared (or come back) since.
  if (log_wd_ < 0 && watch_log()) changed = true;
  return changed;
}

}  // namespace carapace::web
