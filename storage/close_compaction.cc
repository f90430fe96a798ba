#include "storage/close_compaction.h"

#include <thread>

#include "base/lib_log.h"

namespace carapace {

// A CLI command is a short writer: its open flushes what the last one left in
// the write-ahead log into a small file per family, and RocksDB's own
// compactions either never ran before it exited or moved the files down
// whole (a "trivial move"), so a home used by thousands of commands kept
// thousands of files, all of which every reader opens. The merge rewrites
// only files under small_table_bytes, so a byte is rewritten a few times at
// most; it stops at the budget's end (cancelled by the close).
void settle_before_close(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                         const CloseCompactionOptions& options) {
  if (db == nullptr) return;
  const auto until = std::chrono::steady_clock::now() + options.budget;
  uint64_t in_memory = 0;
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  for (auto* h : handles) {
    uint64_t size = 0;
    if (h == nullptr) continue;
    families.push_back(h);
    if (db->GetIntProperty(h, "rocksdb.cur-size-all-mem-tables", &size)) in_memory += size;
  }
  if (in_memory >= options.flush_bytes) {
    rocksdb::Status flushed = db->Flush(rocksdb::FlushOptions(), families);
    if (!flushed.ok()) lib_log().debug("{}: flushing the memtables at close: {}", db->GetName(), flushed.ToString());
  }
  for (auto* h : families) {
    for (int attempt = 0; attempt < 2 && std::chrono::steady_clock::now() < until; ++attempt) {
      rocksdb::ColumnFamilyMetaData meta;
      db->GetColumnFamilyMetaData(h, &meta);
      if (meta.levels.size() < 2) break;
      std::vector<std::string> inputs;
      for (const auto& f : meta.levels[0].files) inputs.push_back(f.name);
      for (const auto& f : meta.levels[1].files) {
        if (f.size < options.small_table_bytes) inputs.push_back(f.name);
      }
      if (inputs.size() < options.trigger_files) break;
      rocksdb::CompactionOptions compaction;
      rocksdb::Status merged = db->CompactFiles(compaction, h, inputs, 1);
      if (merged.ok()) break;
      // Files a background compaction holds: wait for it, then once more.
      lib_log().debug("{}: merging level-0 files at close: {}", db->GetName(), merged.ToString());
      while (std::chrono::steady_clock::now() < until) {
        uint64_t running = 0;
        if (!db->GetIntProperty("rocksdb.num-running-compactions", &running) || running == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
}

}  // namespace carapace
