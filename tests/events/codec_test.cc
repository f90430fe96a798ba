#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <utility>

#include "events/event_json.h"
#include "events/payload.h"
#include "tests/support/fill.h"

using namespace carapace;

namespace {

// Calls f.template operator()<T>() for every known event struct.
template <class F, size_t... I>
void for_each_event_type(F&& f, std::index_sequence<I...>) {
  (
      [&] {
        using T = std::variant_alternative_t<I, EventBody>;
        if constexpr (!std::is_same_v<T, UnknownEvent>) f.template operator()<T>();
      }(),
      ...);
}

template <class F>
void for_each_event_type(F&& f) {
  for_each_event_type(std::forward<F>(f), std::make_index_sequence<std::variant_size_v<EventBody>>{});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(codec_tests)

BOOST_AUTO_TEST_CASE(every_event_type_round_trips_with_every_field_set) {
  int types = 0;
  for_each_event_type([&]<class T>() {
    ++types;
    T original{};
    testing::fill(original, 11);
    BOOST_TEST_CONTEXT("type " << wire_name(T::kType)) {
      BOOST_TEST(!(original == T{}));
      std::string payload;
      encode_payload(EventBody{original}, payload);
      EventBody decoded;
      BOOST_TEST(decode_payload(static_cast<uint16_t>(T::kType), payload, &decoded));
      BOOST_REQUIRE(std::holds_alternative<T>(decoded));
      BOOST_TEST((std::get<T>(decoded) == original));
    }
  });
  BOOST_TEST(types == kMaxKnownEventType);
}

BOOST_AUTO_TEST_CASE(default_events_encode_to_nothing_and_decode_back) {
  for_each_event_type([&]<class T>() {
    std::string payload;
    encode_payload(EventBody{T{}}, payload);
    BOOST_TEST(payload.empty(), wire_name(T::kType));
    EventBody decoded;
    BOOST_TEST(decode_payload(static_cast<uint16_t>(T::kType), payload, &decoded));
    BOOST_TEST((std::get<T>(decoded) == T{}));
  });
}

BOOST_AUTO_TEST_CASE(json_rendering_names_every_field) {
  for_each_event_type([&]<class T>() {
    T e{};
    testing::fill(e, 5);
    nlohmann::json j = body_to_json(EventBody{e});
    std::vector<std::string> names;
    std::apply([&](const auto&... f) { (names.emplace_back(f.name), ...); }, T::fields());
    for (const auto& name : names) BOOST_TEST(j.contains(name), name);
  });
  ToolRequested req{.call_id = "c1", .tool = "shell", .args = JsonText{R"({"command":"ls"})"}};
  nlohmann::json j = event_to_json(Event{3, 99, req});
  BOOST_TEST(j["type"] == "tool.requested");
  BOOST_TEST(j["data"]["args"]["command"] == "ls");  // JsonText renders as JSON
  ToolRequested bad{.call_id = "c1", .tool = "shell", .args = JsonText{"{not json"}};
  BOOST_TEST(body_to_json(EventBody{bad})["args"] == "{not json");
}

BOOST_AUTO_TEST_CASE(unknown_fields_are_skipped_for_forward_compatibility) {
  ToolCompleted e{.call_id = "c1", .tool = "shell", .output = "hi", .duration_ms = 5};
  std::string payload;
  codec::encode(payload, e);
  // A newer writer's fields of every kind, interleaved before and after.
  std::string extended;
  codec::encode_one(extended, 99, uint64_t{123456});
  extended += payload;
  codec::encode_one(extended, 100, std::string("new field"));
  codec::encode_one(extended, 101, 2.5);
  ToolCompleted decoded;
  BOOST_TEST(codec::decode(extended, &decoded));
  BOOST_TEST((decoded == e));
}

BOOST_AUTO_TEST_CASE(missing_fields_decode_as_defaults_for_backward_compatibility) {
  // An older writer that knew only call_id and output.
  std::string old;
  codec::encode_one(old, 1, std::string("c9"));
  codec::encode_one(old, 3, std::string("out"));
  ToolCompleted decoded;
  BOOST_TEST(codec::decode(old, &decoded));
  BOOST_TEST(decoded.call_id == "c9");
  BOOST_TEST(decoded.output == "out");
  BOOST_TEST(!decoded.is_error);
  BOOST_TEST(decoded.interrupted == false);
}

BOOST_AUTO_TEST_CASE(malformed_payloads_are_rejected) {
  LlmResponded e{};
  testing::fill(e, 3);
  std::string payload;
  codec::encode(payload, e);
  // Every strict prefix either fails or decodes to something else; none crashes.
  int rejected = 0;
  for (size_t n = 0; n < payload.size(); ++n) {
    LlmResponded partial;
    if (!codec::decode(std::string_view(payload.data(), n), &partial))
      ++rejected;
    else
      BOOST_TEST(!(partial == e));
  }
  BOOST_TEST(rejected > 0);
  // A known field with the wrong wire kind.
  std::string wrong;
  codec::encode_one(wrong, 1, std::string("turn should be a varint"));
  LlmResponded out;
  BOOST_TEST(!codec::decode(wrong, &out));
  // Kind 7 does not exist.
  std::string bad_kind = "\x0f";
  BOOST_TEST(!codec::decode(bad_kind, &out));
}

BOOST_AUTO_TEST_CASE(nested_messages_longer_than_127_bytes_round_trip) {
  LlmResponded e{.turn = 1};
  e.tool_calls.push_back(ToolCall{"id", "write_file", JsonText{std::string(5000, 'a')}});
  e.tool_calls.push_back(ToolCall{"id2", "shell", JsonText{"{}"}});
  std::string payload;
  codec::encode(payload, e);
  LlmResponded decoded;
  BOOST_TEST(codec::decode(payload, &decoded));
  BOOST_TEST((decoded == e));
}

// The hashes encode into a codec::Buffer (in place) and everything else into
// a std::string: the two must give the same bytes, or a state hash would
// change with the buffer it was computed in.
BOOST_AUTO_TEST_CASE(a_buffer_and_a_string_hold_the_same_encoding) {
  int types = 0;
  codec::Buffer buffer;
  for_each_event_type([&]<class T>() {
    ++types;
    T original{};
    testing::fill(original, 7);
    std::string text;
    codec::encode(text, original);
    buffer.clear();
    codec::encode(buffer, original);
    BOOST_TEST(buffer.view() == text, wire_name(T::kType));
  });
  BOOST_TEST(types == kMaxKnownEventType);
  // Nested bodies whose lengths take two and three bytes (the body is moved
  // up to make room), and a buffer that grows many times over.
  for (size_t size : {100u, 127u, 128u, 16383u, 16384u, 300000u}) {
    LlmResponded e{.turn = 3, .text = "before"};
    e.tool_calls.push_back(ToolCall{"id", "write_file", JsonText{std::string(size, 'a')}});
    e.tool_calls.push_back(ToolCall{"id2", "shell", JsonText{"{}"}});
    e.usage.input = 300;
    std::string text;
    codec::encode(text, e);
    buffer.clear();
    codec::encode(buffer, e);
    BOOST_TEST(buffer.view() == text, "argument of " << size << " bytes");
    LlmResponded decoded;
    BOOST_TEST(codec::decode(buffer.view(), &decoded));
    BOOST_TEST((decoded == e));
  }
}

BOOST_AUTO_TEST_CASE(type_names_round_trip) {
  for (uint16_t t = 1; t <= kMaxKnownEventType; ++t) {
    auto type = event_type_from_name(wire_name(t));
    BOOST_REQUIRE(type.has_value());
    BOOST_TEST(static_cast<uint16_t>(*type) == t);
  }
  BOOST_TEST(wire_name(999) == "unknown");
  for (uint16_t t = 1; t <= kMaxKnownEventType; ++t) BOOST_TEST(!wire_name(t).empty(), t);
  BOOST_TEST(!event_type_from_name("llm.nonsense").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
