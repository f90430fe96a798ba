// Record grammar (all integers little-endian unless noted):
//
//   record        := crc32c:fixed32 format_version:u8 flags:u8 type:fixed16
//                    timestamp_us:fixed64 payload
//   crc32c        := mask(CRC32C(key || record[4..end]))   -- key = log key bytes
//   format_version:= 1
//   flags         := bit 0 "required": an unknown type with it set stops readers
//   type          := EventType number (events/event_type.h)
//   payload       := field*                                 -- until end of value
//   field         := key:varint value
//   key           := tag << 3 | kind
//   value         := varint                      (kind 0: bool, uint, zigzag int, enum)
//                  | fixed64                     (kind 1: double)
//                  | length:varint byte*length   (kind 2: string, digest, nested)
//
// Fields equal to their default are omitted; repeated fields repeat their key;
// a reader skips tags it does not know.
#include "events/record.h"

#include <cstdio>

#include "base/crc32c.h"
#include "events/payload.h"
#include "events/record_format.h"
#include "events/wire.h"

namespace carapace {
namespace {

uint32_t record_crc(std::string_view key, std::string_view value) {
  uint32_t crc = crc32c::extend(0, key.data(), key.size());
  return crc32c::extend(crc, value.data() + 4, value.size() - 4);
}

std::string hex32(uint32_t v) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

uint16_t event_type_number(const EventBody& body) {
  return std::visit(
      [](const auto& e) -> uint16_t {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, UnknownEvent>) {
          return e.type;
        } else {
          return static_cast<uint16_t>(T::kType);
        }
      },
      body);
}

void encode_record(std::string_view key, const Event& event, std::string* out) {
  size_t start = out->size();
  const auto* unknown = std::get_if<UnknownEvent>(&event.body);
  out->append(4, '\0');  // crc, filled below
  out->push_back(static_cast<char>(unknown ? unknown->format_version : record::kFormatVersion));
  out->push_back(static_cast<char>(unknown ? unknown->flags : 0));
  uint16_t type = event.type_number();
  out->push_back(static_cast<char>(type & 0xff));
  out->push_back(static_cast<char>(type >> 8));
  wire::put_fixed64_le(*out, static_cast<uint64_t>(event.ts_us));
  encode_payload(event.body, *out);
  std::string_view value(out->data() + start, out->size() - start);
  wire::store_fixed32_le(out->data() + start, crc32c::mask(record_crc(key, value)));
}

Status parse_record(std::string_view key, std::string_view value, RecordHeader* header,
                    std::string_view* payload) {
  if (value.size() < record::kHeaderSize) {
    return Status::corruption("record truncated: " + std::to_string(value.size()) +
                              " bytes, the header alone is " + std::to_string(record::kHeaderSize));
  }
  header->masked_crc = wire::load_fixed32_le(value.data() + record::kCrcOffset);
  uint32_t expected = crc32c::unmask(header->masked_crc);
  uint32_t actual = record_crc(key, value);
  if (expected != actual) {
    return Status::corruption("checksum mismatch: stored " + hex32(expected) + ", computed " + hex32(actual) +
                              " over " + std::to_string(value.size()) + " bytes")
        .with_detail(Status::Detail::kChecksumMismatch);
  }
  header->format_version = static_cast<uint8_t>(value[record::kVersionOffset]);
  header->flags = static_cast<uint8_t>(value[record::kFlagsOffset]);
  header->type = static_cast<uint16_t>(static_cast<uint8_t>(value[record::kTypeOffset]) |
                                       static_cast<uint8_t>(value[record::kTypeOffset + 1]) << 8);
  header->ts_us = static_cast<int64_t>(wire::load_fixed64_le(value.data() + record::kTimestampOffset));
  if (header->format_version == 0) {
    return Status::corruption("format version 0 is not a valid version");
  }
  *payload = value.substr(record::kHeaderSize);
  return Status();
}

Status decode_record(std::string_view key, std::string_view value, uint64_t seq, Event* out,
                     uint64_t (*skip_tags)(uint16_t type)) {
  RecordHeader header;
  std::string_view payload;
  CARAPACE_RETURN_IF_ERROR(parse_record(key, value, &header, &payload));
  out->seq = seq;
  out->ts_us = header.ts_us;
  bool newer_format = header.format_version > record::kFormatVersion;
  bool known_type = header.type >= 1 && header.type <= kMaxKnownEventType;
  if (newer_format || !known_type) {
    if (header.flags & record::kFlagRequired) {
      return Status::unsupported("record of type " + std::to_string(header.type) + ", format version " +
                                 std::to_string(header.format_version) +
                                 ", is marked required and this build cannot read it; "
                                 "upgrade carapace");
    }
    UnknownEvent unknown;
    unknown.type = header.type;
    unknown.format_version = header.format_version;
    unknown.flags = header.flags;
    unknown.payload.assign(payload);
    out->body = std::move(unknown);
    return Status();
  }
  if (header.flags & ~record::kKnownFlags) {
    return Status::corruption("unknown flag bits " + hex32(header.flags) + " on a " +
                              std::string(wire_name(header.type)) + " record");
  }
  if (!decode_payload(header.type, payload, &out->body, skip_tags != nullptr ? skip_tags(header.type) : 0)) {
    return Status::corruption("payload of " + std::string(wire_name(header.type)) + " does not decode (" +
                              std::to_string(payload.size()) + " bytes)");
  }
  return Status();
}

}  // namespace carapace
