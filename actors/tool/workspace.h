// Workspace: confinement of the paths a model names to a session's workspace
// root, for the file tools and the shell tool's working directory.
//
// WorkspaceRoot is the boundary. It holds a directory file descriptor of the
// root, and every path is opened beneath it by the kernel: openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS. No "..", symbolic link, /proc
// magic link, or directory swapped for a link while the path is being
// resolved (a rename race) can lead an open outside the root: the kernel
// refuses it as it walks. The file tools open, create and rename only through
// it, relative to directory descriptors it returned.
//
// ".." is applied to the text of the path before anything is opened (as `cd`
// does by default), so "link/../x" means "x" in the workspace. A symbolic link
// inside the workspace whose absolute target is also inside it is followed as
// the equivalent relative path (RESOLVE_BENEATH refuses every absolute link);
// the result is still opened beneath the root.
//
// resolve_in_workspace is the older, textual check: it follows the links of
// the existing part of a path with canonical(). It says precisely why a path
// is refused (which link leads where), so WorkspaceRoot uses it to explain a
// refusal and to re-root absolute links; it is not a boundary by itself,
// since checking and opening are separate steps.
//
// Thread safety: WorkspaceRoot is immutable once open and may be used from
// several threads; the functions only read the file system.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace carapace {

// Limits of a path a model may give: Linux's PATH_MAX and NAME_MAX.
constexpr size_t kMaxPathBytes = 4095;
constexpr size_t kMaxNameBytes = 255;

class WorkspaceRoot {
 public:
  WorkspaceRoot() = default;
  ~WorkspaceRoot();
  WorkspaceRoot(WorkspaceRoot&& other) noexcept;
  WorkspaceRoot& operator=(WorkspaceRoot&& other) noexcept;
  WorkspaceRoot(const WorkspaceRoot&) = delete;
  WorkspaceRoot& operator=(const WorkspaceRoot&) = delete;

  // Opens the root: `workspace` canonicalised (canonical_workspace's errors).
  static Status open(const std::string& workspace, WorkspaceRoot* out);

  const std::string& path() const { return path_; }  // canonical
  int fd() const { return fd_; }                      // O_PATH | O_DIRECTORY

  // `requested` (relative to the root, or absolute) as a path relative to
  // the root without "." or ".." ("." for the root itself). invalid_argument
  // naming the path: empty, a NUL byte, longer than kMaxPathBytes or with a
  // name longer than kMaxNameBytes, or outside the root by ".." or by being
  // an absolute path elsewhere.
  Status relative(const std::string& requested, std::string* rel) const;

  // openat2(fd(), rel, flags | O_CLOEXEC, mode) beneath the root, following
  // links that stay inside. *out gets the descriptor. A failure names
  // `requested` and why: not_found (it does not exist), invalid_argument (it
  // leaves the workspace through a link, which is named; a link loops; a
  // component is not a directory), io_error otherwise.
  Status open(const std::string& requested, const std::string& rel, int flags, mode_t mode, int* out) const;

 private:
  int fd_ = -1;
  std::string path_;
  std::string alias_;  // the workspace as given, made absolute (it may name the root through a link)
};

// `rel` split into its directory part ("." when it has none) and its last
// name: "a/b/c" -> "a/b", "c".
void split_relative(const std::string& rel, std::string* dir, std::string* name);

// Resolves `requested` (relative to `workspace`, or absolute) to an absolute
// path inside the workspace, without "." or ".." components, whose existing
// part has no symbolic links. Refuses with Status::invalid_argument, naming
// the path and why, any path that escapes the root: by "..", by an absolute
// path elsewhere, or through a symbolic link. With `must_exist`, a path that
// does not exist is Status::not_found. `workspace` need not be canonical.
Status resolve_in_workspace(const std::string& workspace, const std::string& requested, bool must_exist,
                            std::string* resolved);

// The canonical path (absolute, links followed) of `path`, which must be an
// existing directory: Status::not_found if it does not exist,
// Status::invalid_argument if it is not a directory or is empty.
Status canonical_workspace(const std::string& path, std::string* canonical);

}  // namespace carapace
