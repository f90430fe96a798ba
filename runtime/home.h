// Home: the checks that make a Carapace home belong to the user who runs it.
//
// A home holds the event log and a config.json whose hooks carapace runs as
// commands. A home (or a config, or a hook's program) that another user can
// write is a way to make whoever runs carapace there run that user's
// commands — so, as git does with `safe.directory` and ssh with
// `StrictModes`, carapace refuses one:
//   - the home must belong to the user running carapace and be writable by
//     no one else; carapace creates it (and everything in it) owner-only,
//     0700, whatever the umask;
//   - a config file, and a hook's program named by path, must belong to the
//     user or to root and be writable by no one else.
// Each refusal says what is wrong and the command that fixes it.
// Pure functions over the file system; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace carapace {

// Checks `home`, creating it owner-only first when it is missing and
// `create` is set. A missing home with `create` unset is not an error (the
// log then reports it missing).
Status prepare_home(const std::string& home, bool create);

// Checks a file carapace would take instructions from; `what` names it in
// messages ("config file", "hook program").
Status check_trusted_file(const std::string& path, std::string_view what);

// The program a hook command runs, when it is named by a path (its first word
// contains a '/'): checked as check_trusted_file does. Commands found on PATH
// are not checked.
Status check_hook_program(const std::string& first_word);

}  // namespace carapace
