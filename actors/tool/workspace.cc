#include "actors/tool/workspace.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "base/text.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

// "/a/b/" and "/a/b" name the same directory; comparisons below go by
// components, where the trailing separator would be an extra empty one.
fs::path without_trailing_separator(fs::path p) {
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

bool is_within(const fs::path& path, const fs::path& root) {
  return std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
}

// A path for a message: relative to the workspace when inside it, so that
// the same call says the same thing wherever the workspace is.
std::string shown_in(const fs::path& path, const fs::path& root) {
  if (!is_within(path, root)) return path.string();
  fs::path rel = path.lexically_relative(root);
  return rel.empty() || rel == "." ? std::string(".") : rel.string();
}

// resolve_in_workspace for `requested_text`, with messages that name
// `requested` as the path.
Status resolve_text(const std::string& workspace, const std::string& requested_text, const std::string& requested,
                    bool must_exist, std::string* resolved);

}  // namespace

Status canonical_workspace(const std::string& path, std::string* canonical) {
  if (path.empty()) return Status::invalid_argument("the workspace path is empty");
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return Status::not_found("workspace '" + path + "' does not exist");
  }
  if (ec) return Status::invalid_argument("workspace '" + path + "' cannot be resolved: " + ec.message());
  if (!fs::is_directory(real, ec)) {
    return Status::invalid_argument("workspace '" + path + "' is not a directory");
  }
  *canonical = real.string();
  return Status::ok_status();
}

Status resolve_in_workspace(const std::string& workspace, const std::string& requested, bool must_exist,
                            std::string* resolved) {
  return resolve_text(workspace, requested, requested, must_exist, resolved);
}

namespace {

Status resolve_text(const std::string& workspace, const std::string& requested_text, const std::string& requested,
                    bool must_exist, std::string* resolved) {
  std::string root_text;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(workspace, &root_text));
  const fs::path root(root_text);
  const std::string inside_hint = "; use a path inside it";

  if (requested_text.empty()) {
    return Status::invalid_argument("the path is empty; give a path inside the workspace ('.' is the workspace "
                                    "itself)");
  }
  if (requested_text.find('\0') != std::string::npos) {
    return Status::invalid_argument("path '" + requested + "' contains a NUL byte");
  }

  const fs::path given(requested_text);
  fs::path lexical =
      without_trailing_separator((given.is_absolute() ? given : root / given).lexically_normal());
  if (!is_within(lexical, root)) {
    // The caller may know the workspace by a path through a link (/tmp/ws
    // when /tmp is one); an absolute path under that spelling is inside too.
    std::error_code ec;
    fs::path alias = without_trailing_separator(fs::absolute(workspace, ec).lexically_normal());
    if (ec || !is_within(lexical, alias)) {
      return Status::invalid_argument("path '" + requested + "' is outside the workspace" + inside_hint);
    }
    lexical = without_trailing_separator((root / lexical.lexically_relative(alias)).lexically_normal());
  }

  // Split into the existing part, whose links canonical() follows, and the
  // part that does not exist yet, which has no links to follow.
  fs::path existing;
  fs::path missing;
  for (const fs::path& part : lexical) {
    if (!missing.empty()) {
      missing /= part;
      continue;
    }
    fs::path next = existing / part;
    std::error_code ec;
    fs::file_status status = fs::symlink_status(next, ec);
    if (status.type() == fs::file_type::not_found) {
      missing = part;
      continue;
    }
    if (ec) {
      return Status::invalid_argument("path '" + requested + "' cannot be checked: '" + shown_in(next, root) +
                                      "': " + ec.message());
    }
    existing = std::move(next);
  }

  std::error_code ec;
  fs::path real = fs::canonical(existing, ec);
  if (ec) {
    std::error_code link_ec;
    if (fs::is_symlink(fs::symlink_status(existing, link_ec))) {
      std::string link = shown_in(existing, root);
      return Status::invalid_argument(
          "path '" + requested + "' goes through the symbolic link '" + link +
          "', whose target does not exist or loops; use a path inside the workspace that does not go "
          "through it");
    }
    return Status::invalid_argument("path '" + requested + "' cannot be resolved: " + ec.message());
  }
  fs::path full = missing.empty() ? real : real / missing;
  if (!is_within(real, root)) {
    return Status::invalid_argument("path '" + requested + "' leads through a symbolic link to '" +
                                    full.string() + "', which is outside the workspace" + inside_hint);
  }
  if (must_exist && !missing.empty()) {
    return Status::not_found("path '" + requested + "' does not exist in the workspace");
  }
  *resolved = full.string();
  return Status::ok_status();
}

}  // namespace

// ---- WorkspaceRoot -------------------------------------------------------

namespace {

// Text the model gave, shortened for a message.
std::string shown_path(const std::string& requested) {
  if (requested.size() <= 200) return requested;
  return requested.substr(0, 100) + "..." + requested.substr(requested.size() - 40);
}

Status errno_status(const std::string& requested, int err) {
  const std::string what = "path '" + shown_path(requested) + "'";
  switch (err) {
    case ENOTDIR:
      return Status::invalid_argument(what + ": a part of it that should be a directory is not one");
    case ENAMETOOLONG:
      return Status::invalid_argument(what + " is too long");
    case EACCES:
    case EPERM:
      return Status::invalid_argument(what + ": permission denied");
    case ELOOP:
      return Status::invalid_argument(what + " goes through too many symbolic links, or through a /proc "
                                             "link; use a path inside the workspace without them");
    case EXDEV:
      return Status::invalid_argument(what + " leads outside the workspace through a symbolic link; use a "
                                             "path inside it");
    case ENOENT:
      return Status::not_found(what + " does not exist in the workspace");
    default:
      return Status::io_error("cannot open " + what + ": " + errno_text(err));
  }
}

int openat2_beneath(int root, const std::string& rel, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // EAGAIN: a rename raced with the walk (the kernel asks to try again).
    if ((errno != EAGAIN && errno != EINTR) || attempt == 16) return -errno;
  }
}

}  // namespace

WorkspaceRoot::~WorkspaceRoot() {
  if (fd_ >= 0) ::close(fd_);
}

WorkspaceRoot::WorkspaceRoot(WorkspaceRoot&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), alias_(std::move(other.alias_)) {}

WorkspaceRoot& WorkspaceRoot::operator=(WorkspaceRoot&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    alias_ = std::move(other.alias_);
  }
  return *this;
}

Status WorkspaceRoot::open(const std::string& workspace, WorkspaceRoot* out) {
  std::string canonical;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(workspace, &canonical));
  int fd = ::open(canonical.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Status::invalid_argument("workspace '" + workspace + "' cannot be opened: " + errno_text(errno));
  }
  WorkspaceRoot root;
  root.fd_ = fd;
  root.path_ = std::move(canonical);
  std::error_code ec;
  root.alias_ = without_trailing_separator(fs::absolute(workspace, ec).lexically_normal()).string();
  *out = std::move(root);
  return Status::ok_status();
}

Status WorkspaceRoot::relative(const std::string& requested, std::string* rel) const {
  const std::string inside_hint = "; use a path inside it";
  if (requested.empty()) {
    return Status::invalid_argument("the path is empty; give a path inside the workspace ('.' is the workspace "
                                    "itself)");
  }
  if (requested.find('\0') != std::string::npos) {
    return Status::invalid_argument("path '" + shown_path(requested) + "' contains a NUL byte");
  }
  if (requested.size() > kMaxPathBytes) {
    return Status::invalid_argument("path '" + shown_path(requested) + "' is too long: " +
                                    std::to_string(requested.size()) + " bytes, where the limit is " +
                                    std::to_string(kMaxPathBytes));
  }
  for (size_t begin = 0; begin < requested.size();) {
    size_t end = requested.find('/', begin);
    if (end == std::string::npos) end = requested.size();
    if (end - begin > kMaxNameBytes) {
      return Status::invalid_argument("path '" + shown_path(requested) + "' is too long: its name '" +
                                      shown_path(requested.substr(begin, end - begin)) + "' has " +
                                      std::to_string(end - begin) + " bytes, where the limit is " +
                                      std::to_string(kMaxNameBytes));
    }
    begin = end + 1;
  }
  const fs::path root(path_);
  const fs::path given(requested);
  fs::path lexical =
      without_trailing_separator((given.is_absolute() ? given : root / given).lexically_normal());
  if (!is_within(lexical, root)) {
    // An absolute path under the workspace's other spelling (/tmp/ws when /tmp is a link).
    if (alias_.empty() || !is_within(lexical, fs::path(alias_))) {
      return Status::invalid_argument("path '" + shown_path(requested) + "' is outside the workspace" +
                                      inside_hint);
    }
    lexical = without_trailing_separator((root / lexical.lexically_relative(alias_)).lexically_normal());
  }
  fs::path relative = lexical.lexically_relative(root);
  *rel = relative.empty() ? "." : relative.string();
  return Status::ok_status();
}

Status WorkspaceRoot::open(const std::string& requested, const std::string& rel, int flags, mode_t mode,
                           int* out) const {
  int fd = openat2_beneath(fd_, rel, flags, mode);
  if (fd >= 0) {
    *out = fd;
    return Status::ok_status();
  }
  const int err = -fd;
  if (err != EXDEV && err != ENOENT && err != ELOOP) return errno_status(requested, err);
  // Why? The textual check names the link that leaves, or the dangling one;
  // or it finds that the path stays inside through an absolute link, which
  // RESOLVE_BENEATH refuses: then open the equivalent relative path, still
  // beneath the root.
  std::string resolved;
  Status why = resolve_text(path_, rel, requested, /*must_exist=*/true, &resolved);
  if (!why.ok()) return why;
  std::string rerooted;
  if (!relative(resolved, &rerooted).ok() || rerooted == rel) return errno_status(requested, err);
  fd = openat2_beneath(fd_, rerooted, flags, mode);
  if (fd < 0) return errno_status(requested, -fd);
  *out = fd;
  return Status::ok_status();
}

void split_relative(const std::string& rel, std::string* dir, std::string* name) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) {
    *dir = ".";
    *name = rel;
  } else {
    *dir = rel.substr(0, slash);
    *name = rel.substr(slash + 1);
  }
}

}  // namespace carapace
