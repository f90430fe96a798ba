// DbDirectory: what a database directory holds, and creating one atomically.
//
// A RocksDB database is a directory of files named CURRENT, MANIFEST-*,
// OPTIONS-*, *.log (the WAL) and *.sst. Opening one with create_if_missing
// over a directory that lost its CURRENT file would write a new, empty
// database over the old one's files; and a database created in place by
// DB::Open is written a file at a time, so a crash during its creation
// leaves a half-made one that readers cannot open. So:
//   - inspect() says whether a directory is absent, empty, a whole database,
//     or the remains of one (database files without CURRENT or a MANIFEST);
//   - create_atomically() makes the database in a temporary sibling
//     directory, syncs it, and renames it into place: a crash leaves either
//     no database or a complete one.
// Thread-compatible (no shared state).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace carapace {

enum class DbDirectoryState {
  kAbsent,    // no such directory
  kEmpty,     // a directory with nothing in it
  kDatabase,  // CURRENT and the MANIFEST it names are there
  kDamaged,   // database files, but CURRENT or its MANIFEST is missing
  kUnreadable,  // this process may not look inside (permissions)
};

// What `dir` holds; for kDamaged, *what says which file is missing and what is there.
DbDirectoryState inspect_db_directory(const std::string& dir, std::string* what);

// Creates the database at `dir` (which must be absent or empty) by calling
// `create` on a temporary sibling directory, then syncing every file in it
// and renaming it to `dir` (owner-only). `create` opens and closes the
// database there.
Status create_db_atomically(const std::string& dir, const std::function<Status(const std::string&)>& create);

}  // namespace carapace
