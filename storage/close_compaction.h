// What a short-lived writer of a RocksDB database does before it closes, so
// that a home used by thousands of CLI commands keeps a bounded number of
// table files (docs/architecture.md, "Compaction"). The event log and the
// trace store both do it.
//
// Internal to storage/: this header includes RocksDB.
#pragma once

#include <rocksdb/db.h>

#include <chrono>
#include <vector>

namespace carapace {

struct CloseCompactionOptions {
  // A family with this many small files (all of level 0, those of level 1
  // under small_table_bytes) has them merged into level 1.
  uint64_t trigger_files = 8;
  uint64_t small_table_bytes = 4 << 20;
  // With this much in the memtables, they are written to files first (else
  // every reader's open replays the write-ahead log).
  uint64_t flush_bytes = 256 << 10;
  // The merge stops here; what is left, the next writer does.
  std::chrono::milliseconds budget{3000};
};

void settle_before_close(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& families,
                         const CloseCompactionOptions& options = {});

}  // namespace carapace
