// ScratchDir: the per-call scratch directories tool processes get as
// $TMPDIR, named for the process that made them so that the next runtime to
// start can reclaim those a killed process left behind.
//
// A call's scratch directory is removed when the call ends; a SIGKILL of
// the runtime (or a power loss) leaves it. Its name records the maker's pid
// and start time (/proc/PID/stat, field 22): a directory whose maker no
// longer runs is stale, and reclaim_scratch_dirs() removes it. Thread-safe:
// no shared state.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace carapace {

// $TMPDIR when it is an absolute path, else /tmp.
std::string scratch_base();

// Makes `base`/carapace-call-PID-START-XXXXXX (mode 0700) and returns its path.
Status make_scratch_dir(const std::string& base, std::string* path);

// Removes the scratch directories under `base` that this user owns and
// whose maker is gone (no process with that pid, or one started at another
// time); leaves every other entry alone. Returns how many it removed.
size_t reclaim_scratch_dirs(const std::string& base);

}  // namespace carapace
