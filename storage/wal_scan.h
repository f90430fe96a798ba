// WalScan: where a RocksDB write-ahead log file is damaged, if it is.
//
// RocksDB refuses to open a database whose WAL is damaged before its tail
// (the recovery rule in storage/db_options.h) but says only "Corruption:
// checksum mismatch". This reads a WAL file the way RocksDB's log reader
// does, to name the file and the byte offset of the first damaged record.
//
// The format (RocksDB's db/log_format.h, LevelDB's doc/log_format.md): the
// file is a sequence of 32 KiB blocks; a block holds physical records
//   checksum:fixed32 length:fixed16 type:uint8 [log_number:fixed32] payload
// (the log number only in the "recyclable" types 5-8 and 11), and a trailer of
// fewer than a header's bytes, which readers skip. The checksum is the masked
// CRC32C of the type byte, the log number if any, and the payload.
//
// Pure functions over bytes or a file; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace carapace {

struct WalScan {
  uint64_t bytes = 0;         // the file's size
  uint64_t records = 0;       // physical records whose checksum matched
  bool damaged = false;       // a record before the end fails its checks
  bool cut_short = false;     // the last record ends past the end of the file (a torn tail)
  uint64_t offset = 0;        // where the damaged or cut-short record starts
  std::string reason;         // what is wrong with it
};

// Scans WAL bytes.
WalScan scan_wal(std::string_view bytes);

// Scans the WAL file at `path`.
Status scan_wal_file(const std::string& path, WalScan* out);

// Calls `record` with each logical record (a write batch) of WAL bytes,
// reassembled from its fragments, in order. A damaged physical record, and
// the rest of its 32 KiB block, are skipped as RocksDB's reader skips them
// (a record in pieces across the damage is dropped); *damaged counts them.
void read_wal_records(std::string_view bytes, const std::function<void(std::string_view)>& record,
                      uint64_t* damaged);

// For a database directory RocksDB refused to open: the first WAL file
// (oldest first) with damage before its end, as "file NNNNNN.log: <reason> in
// the record at byte X of Y", or "" when every WAL reads whole.
std::string describe_wal_damage(const std::string& db_dir);

}  // namespace carapace
