// The RocksDB options the event log runs with, in one place, so that the
// benchmarks' raw baselines use exactly the same ones.
//
// Internal to storage/ and bench/: this header includes RocksDB.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <memory>
#include <vector>

namespace carapace {

struct LogDbOptions {
  rocksdb::DBOptions db;
  rocksdb::ColumnFamilyOptions family;  // every column family's but the snapshots'
  // `family` with a bloom filter on each key's session (session_id 0x00):
  // an iterator on it, unless `total_order_seek`, stays in its seek key's session.
  rocksdb::ColumnFamilyOptions snapshots;
  std::shared_ptr<rocksdb::Cache> block_cache;
};

// The logger every RocksDB database of a home uses (the log, the body store,
// the trace store): RocksDB's diagnostics go to the process's log instead of
// a LOG file in the database directory, whose writer fails on a full disk
// and then aborts the process (an assertion in the build Debian ships) at
// RocksDB's next message, often while the database closes.
std::shared_ptr<rocksdb::Logger> process_rocksdb_logger();

// Sizes level 1, and the table files of every level, to what level 0 holds
// when it is compacted (four flushes of `family.write_buffer_size`),
// instead of RocksDB's 256 MB and 64 MB, which suit 64 MB memtables. Keys
// that grow at one point per session (the log's, the trace store's) put
// every level-0 file across most of the key range, so each compaction into
// level 1 rewrites the level-1 files between its sessions' keys: with small
// flushes (the runtime's 1 MB cap) nearly all of a level 1 that only grows,
// until 256 MB, and the bytes compaction writes grow with the square of the
// log (bench/README.md, `compaction_bench`). A small level 1 passes its
// bytes down a level each tenfold instead. Write buffers set first.
void size_levels_to_flushes(rocksdb::ColumnFamilyOptions& family);

// `writer`: a primary (read-write) instance; else a secondary reader.
// `write_buffer_bytes` caps the memtables of all its families together
// (a flush frees them past it); 0: each family's own 16 MB only.
LogDbOptions log_db_options(bool writer, size_t block_cache_bytes, size_t write_buffer_bytes = 0);

// The log's column families (default, events, sessions, checkpoints,
// snapshots, and sessions_by_time unless `with_time_index` is false: a log
// written before it), each with `options.family` (the snapshots family with
// `options.snapshots`); the default family's merge
// operator adds the session count (storage/session_time_index.h).
std::vector<rocksdb::ColumnFamilyDescriptor> log_families(const LogDbOptions& options,
                                                          bool with_time_index = true);

// The trace store's column families (storage/trace_store.h: default,
// spans, progress, by_start, by_model, by_tool): 4 MB write buffers, levels
// sized to them (16 MB level 1, 16 MB files).
std::vector<rocksdb::ColumnFamilyDescriptor> trace_store_families();

}  // namespace carapace
