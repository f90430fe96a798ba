// Constants of the stored event record (see docs/event-format.md and the
// grammar comment at the top of events/record.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace carapace::record {

// Version of the envelope and payload encoding written by this build.
constexpr uint8_t kFormatVersion = 1;

// crc32c (4) + format_version (1) + flags (1) + type (2) + timestamp (8).
constexpr size_t kHeaderSize = 16;

constexpr size_t kCrcOffset = 0;
constexpr size_t kVersionOffset = 4;
constexpr size_t kFlagsOffset = 5;
constexpr size_t kTypeOffset = 6;
constexpr size_t kTimestampOffset = 8;

// Flag bits. A record of an unknown type with kFlagRequired set must not be
// skipped: the reader stops and reports that a newer build wrote it.
constexpr uint8_t kFlagRequired = 0x01;
constexpr uint8_t kKnownFlags = kFlagRequired;

}  // namespace carapace::record
