#include "storage/db_options.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>

namespace carapace {
namespace {

rocksdb::CompressionType pick_compression() {
  auto supported = rocksdb::GetSupportedCompressions();
  for (auto wanted : {rocksdb::kLZ4Compression, rocksdb::kSnappyCompression}) {
    for (auto have : supported) {
      if (have == wanted) return wanted;
    }
  }
  return rocksdb::kNoCompression;
}

}  // namespace

LogDbOptions log_db_options(bool writer, size_t block_cache_bytes) {
  LogDbOptions o;
  o.db.create_if_missing = false;  // the log creates its database atomically
  o.db.create_missing_column_families = writer;  // a family added by a newer build
  o.db.max_background_jobs = 2;
  o.db.keep_log_file_num = 3;
  o.db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  if (!writer) o.db.max_open_files = -1;  // required of secondaries

  o.block_cache = rocksdb::NewLRUCache(block_cache_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = o.block_cache;
  table.block_size = 16 << 10;
  o.family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.family.compression = pick_compression();
  // Smaller memtables than the 64 MB default: every open (a resume after a
  // crash, each reader) replays the WAL not yet flushed, ~60 MB/s here.
  o.family.write_buffer_size = 16 << 20;
  return o;
}

}  // namespace carapace
