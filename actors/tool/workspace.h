// Workspace: confinement of the paths a model names to a session's workspace
// root, for the file tools and the shell tool's working directory.
//
// A path is accepted only if the file it resolves to lies under the root once
// symbolic links in its existing part are followed. ".." is applied to the
// text of the path before links are followed (as `cd` does by default), so
// "link/../x" means "x" in the workspace; the result is therefore always under
// the root. What does not exist yet (a file write_file will create) is
// appended to the canonical path of its nearest existing ancestor, which must
// itself lie under the root; a dangling symbolic link on the way is refused,
// since creating through it could land anywhere.
//
// This guards against a model's mistakes and casual escapes; it is not a
// sandbox. Checking and opening are separate steps, so a process running
// concurrently in the workspace (the shell tool can run anything) could swap
// a directory for a link in between.
//
// Thread safety: both functions are safe to call from several threads; they
// only read the file system.
#pragma once

#include <string>

#include "base/status.h"

namespace carapace {

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
