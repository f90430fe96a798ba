// Fuzz target: the event record decoder (events/record.h), which reads every
// value of the log, and what a reader does next with a record that decodes:
// render it (log show, --json), summarize it, fold it.
//
// An input is a record's value, read under a fixed key. It is decoded as it
// is, then again with its checksum made right: libFuzzer cannot forge a
// CRC32C, and the payload decoder behind the checksum is what most needs the
// fuzzing. A record that decodes re-encodes to bytes that decode and encode
// to the same bytes again (not to the input itself: a varint may be longer
// than it needs, a field repeated or unknown to this build).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/crc32c.h"
#include "events/event_json.h"
#include "events/event_summary.h"
#include "events/fold.h"
#include "events/record.h"
#include "events/record_format.h"
#include "events/wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

constexpr uint64_t kSeq = 7;

// session "fuzz", seq kSeq: a key as storage/keys.h makes them.
std::string record_key() {
  std::string key = "fuzz";
  key.push_back('\0');
  wire::put_fixed64_be(key, kSeq);
  return key;
}

void decode_and_use(const std::string& key, std::string_view value) {
  Event event;
  if (!decode_record(key, value, kSeq, &event).ok()) return;
  std::string encoded;
  encode_record(key, event, &encoded);
  Event again;
  fuzz::check(decode_record(key, encoded, kSeq, &again).ok(), "a re-encoded record does not decode");
  std::string reencoded;
  encode_record(key, again, &reencoded);
  fuzz::check(reencoded == encoded, "a re-encoded record encodes differently the second time");

  (void)event_to_json(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)event_summary(event);
  SessionState state;
  if (apply(state, std::move(event)).ok()) {
    (void)state_hash(state);
    (void)state_to_json(state).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string key = record_key();
  std::string value(reinterpret_cast<const char*>(data), size);
  decode_and_use(key, value);
  if (value.size() >= record::kHeaderSize) {
    uint32_t crc = crc32c::extend(0, key.data(), key.size());
    crc = crc32c::extend(crc, value.data() + 4, value.size() - 4);
    wire::store_fixed32_le(value.data() + record::kCrcOffset, crc32c::mask(crc));
    decode_and_use(key, value);
  }
  return 0;
}
