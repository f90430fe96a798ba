#include "base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/text.h"
#include "base/unique_fd.h"

namespace carapace {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string byte_size_text(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

Status read_bounded_file(const std::string& path, uint64_t max_bytes, std::string_view what, std::string* out) {
  const std::string named = std::string(what) + " " + path;
  // O_NONBLOCK: opening a FIFO with no writer must not wait for one.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) return Status::not_found(named + " does not exist");
    return Status::io_error(named + " cannot be opened: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::io_error(named + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(named + " is " + kind_of(st.st_mode) + ", not a regular file");
  }
  const std::string too_large =
      named + " is larger than " + byte_size_text(max_bytes) + ", the limit for " + std::string(what);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return Status::invalid_argument(too_large);
  // Read up to one byte past the cap: a file that grew while read is caught too.
  std::string data;
  data.resize(static_cast<size_t>(st.st_size) + 1);
  size_t used = 0;
  for (;;) {
    if (used == data.size()) {
      if (used > max_bytes) return Status::invalid_argument(too_large);
      data.resize(std::min<uint64_t>(max_bytes + 1, data.size() * 2 + 4096));
    }
    ssize_t n = ::read(fd.get(), data.data() + used, data.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(named + " cannot be read: " + errno_text(errno));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  if (used > max_bytes) return Status::invalid_argument(too_large);
  data.resize(used);
  *out = std::move(data);
  return Status::ok_status();
}

}  // namespace carapace
