#include "storage/db_lock.h"

#include <fcntl.h>
#include <unistd.h>

namespace carapace {

pid_t lock_holder(const std::string& dir) {
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
