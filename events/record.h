// Record: the stored form of one event (the value under its key in the log).
//
// A record is a fixed 16-byte header followed by the payload; the checksum
// covers the key as well, so a record copied under another session or seq is
// caught as corruption. docs/event-format.md is the prose spec; the grammar is
// at the top of record.cc; the constants are in record_format.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "events/events.h"

namespace carapace {

struct RecordHeader {
  uint32_t masked_crc = 0;
  uint8_t format_version = 0;
  uint8_t flags = 0;
  uint16_t type = 0;
  int64_t ts_us = 0;
};

// Appends the record for `event` (stored under `key`) to *out.
void encode_record(std::string_view key, const Event& event, std::string* out);

// Checks size and checksum and reads the header. On success *payload views
// into `value`. Messages name what is wrong, not where; callers add the
// session and seq.
Status parse_record(std::string_view key, std::string_view value, RecordHeader* header,
                    std::string_view* payload);

// parse_record, then decodes the payload into *out with the given seq. A
// record of an unknown type (or a newer format version) becomes an
// UnknownEvent, unless it carries kFlagRequired: then Status::unsupported.
// `skip_tags`, when given, names for each type the payload fields to step
// over (codec::decode); they keep their defaults. The fold uses it to leave
// out what it never reads (fold_unread_tags, events/fold.h).
Status decode_record(std::string_view key, std::string_view value, uint64_t seq, Event* out,
                     uint64_t (*skip_tags)(uint16_t type) = nullptr);

}  // namespace carapace
