#include "storage/db_options.h"

#include "base/lib_log.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_buffer_manager.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "storage/event_log.h"
#include "storage/session_time_index.h"

namespace carapace {
namespace {

// RocksDB's diagnostics, to the process's log (spdlog, debug level).
class ProcessLogger : public rocksdb::Logger {
 public:
  ProcessLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, format, ap);
    lib_log().debug("rocksdb: {}", buf);
  }
};

rocksdb::CompressionType pick_compression() {
  auto supported = rocksdb::GetSupportedCompressions();
  for (auto wanted : {rocksdb::kLZ4Compression, rocksdb::kSnappyCompression}) {
    for (auto have : supported) {
      if (have == wanted) return wanted;
    }
  }
  return rocksdb::kNoCompression;
}

// A key's session: everything up to and including the 0x00 after the id
// (storage/keys.h). Its name is stored in each table file built with it; a
// file built without it, or with another, is read without prefix filtering.
class SessionPrefix : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "carapace.SessionPrefix"; }
  // RocksDB transforms only keys InDomain() accepts; any other is its own prefix.
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    const void* separator = std::memchr(key.data(), '\0', key.size());
    if (separator == nullptr) return key;
    return rocksdb::Slice(key.data(), static_cast<const char*>(separator) - key.data() + 1);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return std::memchr(key.data(), '\0', key.size()) != nullptr;
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> process_rocksdb_logger() {
  static const std::shared_ptr<rocksdb::Logger> logger = std::make_shared<ProcessLogger>();
  return logger;
}

// The smallest arena block RocksDB takes (its blocks are multiples of 4 KB).
constexpr size_t kMinArenaBlock = 4 << 10;

void size_levels_to_flushes(rocksdb::ColumnFamilyOptions& family) {
  constexpr uint64_t kMiB = 1 << 20;
  const uint64_t l0 = 4 * static_cast<uint64_t>(family.write_buffer_size);
  family.max_bytes_for_level_base = std::clamp(l0, 4 * kMiB, 64 * kMiB);
  family.target_file_size_base = std::clamp(l0, 8 * kMiB, 64 * kMiB);
}

LogDbOptions log_db_options(bool writer, size_t block_cache_bytes, size_t write_buffer_bytes) {
  LogDbOptions o;
  o.db.create_if_missing = false;  // the log creates its database atomically
  o.db.create_missing_column_families = writer;  // a family added by a newer build
  o.db.max_background_jobs = 2;
  o.db.keep_log_file_num = 3;
  o.db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.db.info_log = process_rocksdb_logger();
  if (!writer) o.db.max_open_files = -1;  // required of secondaries
  // The WAL recovery rule, the same for every open, writer or reader: a
  // record cut short at the very end of the newest WAL (a crash or power loss
  // in the middle of a write that was never acknowledged) is dropped; damage
  // anywhere before that refuses the open. RocksDB's default,
  // kPointInTimeRecovery, would instead keep what precedes the damage and
  // drop everything after it, synced records included, and say nothing.
  o.db.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;

  o.block_cache = rocksdb::NewLRUCache(block_cache_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = o.block_cache;
  table.block_size = 16 << 10;
  // Index and filter blocks live in the block cache, under its cap: kept
  // beside it, they grow with the number of table files (a writer keeps
  // every file open), and a long-running runtime's memory with them.
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  o.family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.family.compression = pick_compression();
  // Smaller memtables than the 64 MB default: every open (a resume after a
  // crash, each reader) replays the WAL not yet flushed, ~60 MB/s here.
  o.family.write_buffer_size = 16 << 20;
  if (write_buffer_bytes != 0) {
    o.db.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(write_buffer_bytes);
    o.family.write_buffer_size = std::min<size_t>(o.family.write_buffer_size, write_buffer_bytes);
    // The manager counts a memtable's arena blocks as they are reserved, and
    // flushes the oldest memtable once they pass 7/8 of the cap. RocksDB's
    // own blocks are an eighth of a family's buffer (128 KB under a 1 MB
    // cap): the five families a runtime writes reached the cap holding
    // little, and each flushed in turn, the events family at a median of
    // 102 KB of records (16 sessions of 3,000 turns: 218 flushes of every
    // family, level 1 rewritten to absorb each few). Blocks of 1/64 of the
    // cap leave it to the records: 444 KB a flush, 68 flushes (event_log_test
    // `a_log_under_a_memory_cap_flushes_in_large_files`). Never larger than
    // RocksDB's own (at most 1 MB), whatever the cap.
    const size_t rocksdb_block = std::min<size_t>(1 << 20, o.family.write_buffer_size / 8);
    o.family.arena_block_size = std::max(kMinArenaBlock, std::min(write_buffer_bytes / 64, rocksdb_block));
  }
  size_levels_to_flushes(o.family);
  // Snapshots: a value is a whole state (megabytes for a long conversation),
  // so a block is often one snapshot. Finding a session's newest snapshot
  // positions in every table file whose range covers the session, and a file
  // without it would read (and decompress) its neighbour's block there. A
  // bloom filter on the session prefix skips such a file unread.
  o.snapshots = o.family;
  rocksdb::BlockBasedTableOptions snapshot_table = table;
  snapshot_table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.snapshots.table_factory.reset(rocksdb::NewBlockBasedTableFactory(snapshot_table));
  o.snapshots.prefix_extractor = std::make_shared<SessionPrefix>();
  return o;
}

std::vector<rocksdb::ColumnFamilyDescriptor> log_families(const LogDbOptions& options, bool with_time_index) {
  rocksdb::ColumnFamilyOptions with_count = options.family;
  with_count.merge_operator = time_index::count_merge_operator();
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, with_count},
      {std::string(kEventsFamily), options.family},
      {std::string(kSessionsFamily), options.family},
      {std::string(kCheckpointsFamily), options.family},
      {std::string(kSnapshotsFamily), options.snapshots}};
  if (with_time_index) families.emplace_back(std::string(kSessionsByTimeFamily), options.family);
  return families;
}

}  // namespace carapace
