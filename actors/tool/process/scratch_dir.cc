#include "actors/tool/process/scratch_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/text.h"

namespace carapace {
namespace {

constexpr std::string_view kPrefix = "carapace-call-";

// A process's start time in clock ticks since boot (/proc/PID/stat field
// 22), or "" when there is no such process.
std::string start_time_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "";
  // The command name (field 2) is in parentheses and may hold spaces: count
  // fields after its closing one.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return "";
  }
  return field;
}

// Read at each call: a forked child is another process.
std::string own_tag() {
  std::string pid = std::to_string(::getpid());
  return pid + "-" + start_time_of(pid);
}

}  // namespace

std::string scratch_base() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

Status make_scratch_dir(const std::string& base, std::string* path) {
  std::string pattern = base + "/" + std::string(kPrefix) + own_tag() + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::io_error("cannot make the call's scratch directory in " + base + ": " + errno_text(errno) +
                            " (give carapace a writable TMPDIR)");
  }
  *path = std::move(pattern);
  return Status::ok_status();
}

size_t reclaim_scratch_dirs(const std::string& base) {
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return 0;
  size_t removed = 0;
  const uid_t me = ::geteuid();
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (!name.starts_with(kPrefix)) continue;
    // PID-START-XXXXXX: a name of the old form (no pid) is left alone.
    std::string_view rest = name.substr(kPrefix.size());
    size_t dash1 = rest.find('-');
    size_t dash2 = dash1 == std::string_view::npos ? dash1 : rest.find('-', dash1 + 1);
    if (dash2 == std::string_view::npos || rest.size() - dash2 != 7) continue;
    std::string pid(rest.substr(0, dash1)), start(rest.substr(dash1 + 1, dash2 - dash1 - 1));
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || start.empty() ||
        start.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    struct stat st {};
    if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != me) {
      continue;
    }
    if (start_time_of(pid) == start) continue;  // its maker still runs
    std::error_code ec;
    std::filesystem::remove_all(base + "/" + std::string(name), ec);  // removes links, never follows them
    if (!ec) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace carapace
