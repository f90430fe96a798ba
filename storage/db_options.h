// The RocksDB options the event log runs with, in one place, so that the
// benchmarks' raw baselines use exactly the same ones.
//
// Internal to storage/ and bench/: this header includes RocksDB.
#pragma once

#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <memory>

namespace carapace {

struct LogDbOptions {
  rocksdb::DBOptions db;
  rocksdb::ColumnFamilyOptions family;  // every column family's
  std::shared_ptr<rocksdb::Cache> block_cache;
};

// `writer`: a primary (read-write) instance; else a secondary reader.
LogDbOptions log_db_options(bool writer, size_t block_cache_bytes);

}  // namespace carapace
