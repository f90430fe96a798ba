// SyncLedgerFileSystem: a RocksDB file system that writes down, as it
// happens, what the database made durable — so that a power loss can be
// simulated after the process is gone (storage/power_loss.h).
//
// A process killed with SIGKILL loses nothing it wrote: the kernel's page
// cache keeps every write. A machine that loses power keeps only what was
// synced. To test the difference, the log is opened over this wrapper, which
// forwards every call to the real file system and appends one line to a
// ledger file for each durability-relevant step, before the call returns:
//
//   C <path>          a file was created (or truncated to zero)
//   S <size> <path>   a file was synced: its first <size> bytes are durable
//   D <dir>           a directory was synced: the files created in it exist
//   r <from>\t<to>    a file is about to be renamed (written before the call)
//   R <from>\t<to>    a file was renamed
//   X <path>          a file was deleted
//
// A rename is written down twice: `r` before the call and `R` after it. A
// process killed between the two has renamed the file without saying so;
// the `r` line lets the simulation see it (the file is gone from <from>).
//
// The ledger is written with plain write(2) calls on an O_APPEND descriptor,
// so it survives the process's death as the page cache does. After the
// process is killed, simulate_power_loss() reads it and takes away from the
// database directory what a power loss would have: unsynced bytes, and files
// whose directory entry was never synced.
//
// `ignore_wal_syncs` is a mutation switch for tests: syncs of WAL files
// (*.log) are forwarded but not written down, as if the code never asked for
// them — a test that still passes with it on does not test durability.
//
// Thread-safe, as RocksDB requires of a file system.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace rocksdb {
class FileSystem;
}

namespace carapace {

struct SyncLedgerOptions {
  std::string ledger_path;  // created if missing, appended to
  bool ignore_wal_syncs = false;
  // The file system written through; the operating system's when null.
  // Tests put one here that dies at a chosen step.
  std::shared_ptr<rocksdb::FileSystem> target;
};

// A wrapper of the operating system's file system that keeps the ledger.
Status make_sync_ledger_fs(const SyncLedgerOptions& options, std::shared_ptr<rocksdb::FileSystem>* out);

}  // namespace carapace
