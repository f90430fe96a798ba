#include <boost/test/unit_test.hpp>

#include "events/record.h"
#include "events/record_format.h"
#include "tests/support/fill.h"
#include "tests/support/printing.h"

using namespace carapace;

namespace {

const std::string kKey = std::string("s1") + '\0' + std::string("\0\0\0\0\0\0\0\x07", 8);

std::string record_of(const Event& e, const std::string& key = kKey) {
  std::string value;
  encode_record(key, e, &value);
  return value;
}

Event sample() {
  LlmResponded r{};
  testing::fill(r, 2);
  return Event{7, 1'732'000'000'123'456, r};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(record_tests)

BOOST_AUTO_TEST_CASE(round_trip_keeps_seq_timestamp_and_body) {
  Event e = sample();
  std::string value = record_of(e);
  BOOST_TEST(value.size() > record::kHeaderSize);
  BOOST_TEST(static_cast<uint8_t>(value[record::kVersionOffset]) == record::kFormatVersion);
  Event out;
  CHECK_OK(decode_record(kKey, value, 7, &out));
  BOOST_TEST((out == e));
}

BOOST_AUTO_TEST_CASE(every_flipped_byte_is_caught_by_the_checksum) {
  std::string value = record_of(sample());
  for (size_t i = 0; i < value.size(); ++i) {
    std::string damaged = value;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
    Event out;
    Status s = decode_record(kKey, damaged, 7, &out);
    BOOST_TEST_CONTEXT("byte " << i) {
      BOOST_TEST(s.is_corruption());
      BOOST_TEST(s.message().find("checksum mismatch") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(truncated_records_are_corruption) {
  std::string value = record_of(sample());
  for (size_t n = 0; n < value.size(); ++n) {
    Event out;
    Status s = decode_record(kKey, value.substr(0, n), 7, &out);
    BOOST_TEST_CONTEXT("length " << n) {
      BOOST_TEST(s.is_corruption());
      if (n < record::kHeaderSize) BOOST_TEST(s.message().find("truncated") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(garbage_is_corruption) {
  Event out;
  BOOST_TEST(decode_record(kKey, std::string(64, '\xab'), 7, &out).is_corruption());
  BOOST_TEST(decode_record(kKey, "", 7, &out).is_corruption());
}

BOOST_AUTO_TEST_CASE(a_record_under_another_key_fails_its_checksum) {
  std::string value = record_of(sample());
  std::string other_key = kKey;
  other_key.back() = '\x08';  // same session, seq 8
  Event out;
  BOOST_TEST(decode_record(other_key, value, 8, &out).is_corruption());
  std::string other_session = "s2" + kKey.substr(2);
  BOOST_TEST(decode_record(other_session, value, 7, &out).is_corruption());
}

BOOST_AUTO_TEST_CASE(unknown_types_are_preserved_byte_for_byte) {
  Event newer{9, 5, UnknownEvent{.type = 900, .format_version = 1, .flags = 0, .payload = "\x08\x01new"}};
  std::string value = record_of(newer);
  Event out;
  CHECK_OK(decode_record(kKey, value, 9, &out));
  BOOST_REQUIRE(std::holds_alternative<UnknownEvent>(out.body));
  BOOST_TEST(std::get<UnknownEvent>(out.body).type == 900);
  BOOST_TEST(out.type_name() == "unknown");
  BOOST_TEST(record_of(out) == value);  // rewriting loses nothing
}

BOOST_AUTO_TEST_CASE(unknown_required_types_stop_the_reader) {
  Event newer{9, 5,
              UnknownEvent{.type = 901, .format_version = 1, .flags = record::kFlagRequired, .payload = "x"}};
  Event out;
  Status s = decode_record(kKey, record_of(newer), 9, &out);
  BOOST_TEST(s.is_unsupported());
  BOOST_TEST(s.message().find("upgrade") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_newer_format_version_of_a_known_type_is_kept_as_unknown) {
  Event newer{9, 5, UnknownEvent{.type = 7, .format_version = 2, .flags = 0, .payload = "v2 layout"}};
  Event out;
  CHECK_OK(decode_record(kKey, record_of(newer), 9, &out));
  BOOST_REQUIRE(std::holds_alternative<UnknownEvent>(out.body));
  BOOST_TEST(std::get<UnknownEvent>(out.body).format_version == 2);
}

BOOST_AUTO_TEST_CASE(unknown_flags_on_a_known_type_are_corruption) {
  // Hand-build a checksummed record with flag 0x80 on a user.message.
  Event e{1, 1, UserMessage{"hi"}};
  Event as_unknown{1, 1, UnknownEvent{.type = 2, .format_version = 1, .flags = 0x80, .payload = ""}};
  std::string payload;
  std::string value = record_of(as_unknown);
  Event out;
  Status s = decode_record(kKey, value, 1, &out);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("flag") != std::string::npos);
  (void)e;
}

BOOST_AUTO_TEST_CASE(payload_that_does_not_decode_is_corruption_naming_the_type) {
  Event bad{1, 1, UnknownEvent{.type = 10, .format_version = 1, .flags = 0, .payload = "\x0a\x50short"}};
  Event out;
  Status s = decode_record(kKey, record_of(bad), 1, &out);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("tool.completed") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
