// DbSalvage: `carapace repair`, the explicit way out when the event log's
// database will not open (a damaged WAL, a lost CURRENT or MANIFEST).
//
// RocksDB's own RepairDB cannot be trusted with this log: without a MANIFEST
// it cannot tell which column family a WAL record belongs to and sets the
// whole WAL aside, and after damage in a WAL it keeps the records before the
// damage and drops the rest without a word. So the salvage reads the files
// itself, as evidence:
//   1. the database directory is renamed aside, untouched
//      (`<dir>.before-repair-<UTC time>`): nothing is ever lost by repairing;
//   2. every table file is read with rocksdb::SstFileReader (its column family
//      is in its properties) and every WAL file physical record by record
//      (storage/wal_scan.h), skipping damaged records as RocksDB's reader
//      does, its write batches parsed with rocksdb::WriteBatch::Iterate;
//   3. every event record whose own CRC32C holds is kept; per session, the
//      records from seq 1 up to the first missing or damaged one are folded,
//      re-checking every checkpoint's state hash;
//   4. a new database is created (atomically) holding, per session, that
//      prefix with its checkpoint and session index rebuilt from the events.
//      A session that lost any record — damaged, missing, or cut off after a
//      gap — keeps only the history up to its last checkpoint that verifies
//      and is closed with a `session.failed` (stop reason `log_damaged`):
//      its lost turns may have had effects, so it is never resumed as if they
//      had not happened; `fork` goes on from any checkpoint it kept.
// Snapshots are not carried over (they are a cache). Refuses while a writer
// holds the database, and does nothing to a database that opens.
// Not thread-safe with any other use of the same directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace carapace {

struct SalvagedSession {
  std::string id;
  uint64_t records_found = 0;  // intact event records found, wherever they were
  uint64_t highest_seq = 0;    // the highest seq among them
  uint64_t kept_to = 0;        // the repaired log holds seq 1..kept_to of the original
  uint64_t first_lost = 0;     // the first seq missing, damaged or refused by the fold; 0: none
  std::string why;             // what happened at first_lost
  uint64_t kept_turn = 0;      // the last checkpointed turn kept
  bool closed = false;         // closed with session.failed (it lost records)
};

struct SalvageReport {
  bool repaired = false;  // false: the database opened; nothing was done
  std::string damage;     // what opening it said was wrong
  std::string original;   // where the original directory now is
  uint64_t table_files = 0, wal_files = 0, unreadable_files = 0;
  uint64_t damaged_wal_records = 0;    // physical WAL records skipped
  uint64_t damaged_event_records = 0;  // event records whose CRC failed
  std::vector<SalvagedSession> sessions;
};

Status salvage_log_db(const std::string& dir, SalvageReport* out);

}  // namespace carapace
