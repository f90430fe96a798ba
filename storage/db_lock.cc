#include "storage/db_lock.h"

#include <fcntl.h>
#include <unistd.h>

namespace carapace {

pid_t lock_holder(const std::string& dir, bool count_this_process) {
  // Asked first, and the file left unopened: closing any descriptor of the
  // LOCK file would drop the record lock this process holds on it (POSIX
  // locks are the process's, released by the first close).
  if (count_this_process && written_by_this_process(dir)) return ::getpid();
  int fd = ::open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 0;
  pid_t holder = 0;
  if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) holder = probe.l_pid;
  ::close(fd);
  return holder;
}

}  // namespace carapace
