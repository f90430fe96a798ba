// The session time index: the sessions of a log ordered by when they last
// changed, so that "the 20 newest" or "updated in the last hour" reads the
// entries it shows, not the whole session index (docs/architecture.md).
//
//   sessions_by_time family:  when:fixed64-big-endian session_id -> ""
//   default family:           "session_count" -> int64 (merged: +1, -1)
//                             "session_time_index" -> "1" once built
//
// `when` is the later of a session's updated_us and created_us, clamped at 0.
// Each entry is written in the batch that writes the session's meta (the
// old one deleted in it), so the index is never ahead of or behind the
// session index; a reader still checks each entry against the meta.
//
// Internal to storage/: this header includes RocksDB.
#pragma once

#include <rocksdb/merge_operator.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "storage/session_meta.h"

namespace carapace::time_index {

inline constexpr std::string_view kCountKey = "session_count";
inline constexpr std::string_view kBuiltKey = "session_time_index";

// When a session last changed, as the index orders it.
int64_t when(const SessionMeta& meta);

std::string key(int64_t when, std::string_view session);

// Splits an index key; false if it is not one.
bool parse_key(std::string_view key, int64_t* when, std::string_view* session);

// The count's value and merge operands: a signed fixed64, little-endian.
std::string count_value(int64_t n);
bool parse_count(std::string_view value, int64_t* n);

// Adds count operands; the default family's merge operator.
std::shared_ptr<rocksdb::MergeOperator> count_merge_operator();

}  // namespace carapace::time_index
