// BoundedFile: reading a whole file named from outside (by a config, a flag,
// a stored configuration) with a cap on its size, refusing what is not a
// regular file.
//
// A path can name /dev/zero (endless), a FIFO (waits forever for a writer),
// a directory or a device; a regular file can be larger than memory. Every
// file read whole because something outside named it goes through
// read_bounded_file(): it opens without blocking, checks the kind with
// fstat on the opened descriptor (no race with a rename), and reads at most
// `max_bytes` (a file that grows past it while read is refused too).
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace carapace {

// Reads `path` into `*out`. Errors name `what` (e.g. "prompt.identity_file")
// and the path: not_found when it does not exist, invalid_argument when it
// is not a regular file ("is a directory", "is a FIFO", "is a character
// device") or holds more than `max_bytes` ("is larger than 1 MiB, the limit
// for ..."), io_error otherwise.
Status read_bounded_file(const std::string& path, uint64_t max_bytes, std::string_view what, std::string* out);

// "1 MiB", "64 MiB", "512 KiB", "300 bytes": a limit as the messages say it.
std::string byte_size_text(uint64_t bytes);

}  // namespace carapace
