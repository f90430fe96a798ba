// Power loss, simulated: after a process that wrote a database over a
// SyncLedgerFileSystem (storage/sync_ledger_fs.h) has died, take away from
// the disk what a machine that lost its power at that moment would have lost.
//
// For every file the ledger names: bytes past its last sync are cut off; a
// file whose creation was never followed by a sync of its directory is
// removed (its directory entry was never made durable). Files the ledger does
// not name are left alone. Renames and deletions are taken as done (the
// model does not bring back a deleted file or undo a rename whose directory
// was not synced; RocksDB syncs the directory after each one it relies on).
// That includes a rename the process died before writing down: announced
// (`r`), not confirmed (`R`), with its source gone and its target there.
//
// With `tear_last_write`, the newest WAL file keeps a random part of its
// unsynced tail instead of none of it: a write the disk had partly persisted
// (a torn write), which recovery must tolerate as a damaged tail.
//
// Afterwards the ledger is emptied: what is on disk is now all there is. Not
// thread-safe; run it while no process has the database open.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace carapace {

struct PowerLossOptions {
  std::string ledger_path;
  bool tear_last_write = false;
  uint64_t seed = 0;  // chooses how much of a torn write is kept
};

struct PowerLossReport {
  uint64_t files_truncated = 0;
  uint64_t bytes_dropped = 0;
  uint64_t files_removed = 0;
  std::string torn_file;  // set when a write was torn
  uint64_t torn_bytes_kept = 0;
};

// Takes away what a power loss would have. No ledger at options.ledger_path
// means nothing was written through the ledger's file system: nothing changes.
Status simulate_power_loss(const PowerLossOptions& options, PowerLossReport* report);

}  // namespace carapace
