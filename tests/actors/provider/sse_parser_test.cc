#include "actors/provider/sse_parser.h"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace carapace {
namespace {

std::vector<std::string> parse(const std::vector<std::string_view>& pieces, SseParser* parser) {
  std::vector<std::string> out;
  for (std::string_view p : pieces) {
    parser->feed(p, [&out](const SseEvent& e) { out.push_back(e.type + "|" + e.id + "|" + e.data); });
  }
  return out;
}

std::vector<std::string> parse(std::string_view all) {
  SseParser p;
  return parse({all}, &p);
}

// Mixed line ends, a BOM, comments, multi-line data, multi-byte characters,
// an event name, a field without a colon and one without a space.
const std::string kStream =
    "\xEF\xBB\xBF: keep-alive\r\n"
    "event: message_start\r\n"
    "data: {\"a\":\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"}\r\n"
    "\r\n"
    "data:first\n"
    "data: second\r"
    "id: 7\r"
    "\r"
    ":another comment\n"
    "data\n"
    "\n"
    "event: ping\n"
    "\n"  // no data: nothing dispatched
    "data: [DONE]\n"
    "\n"
    "data: cut off";

const std::vector<std::string> kExpected = {
    "message_start||{\"a\":\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
    "message|7|first\nsecond",
    "message||",
    "message||[DONE]",
};

BOOST_AUTO_TEST_CASE(whole_stream) {
  SseParser p;
  BOOST_TEST(parse({kStream}, &p) == kExpected, boost::test_tools::per_element());
  BOOST_TEST(p.pending());  // "data: cut off" has no blank line
  BOOST_TEST(p.comments() == 2u);
}

BOOST_AUTO_TEST_CASE(every_single_split_point) {
  std::string_view all = kStream;
  for (size_t i = 0; i <= all.size(); ++i) {
    SseParser p;
    auto got = parse({all.substr(0, i), all.substr(i)}, &p);
    BOOST_TEST_CONTEXT("split at " << i) { BOOST_TEST(got == kExpected, boost::test_tools::per_element()); }
  }
}

BOOST_AUTO_TEST_CASE(every_pair_of_split_points) {
  std::string_view all = kStream;
  size_t failures = 0;
  for (size_t i = 0; i <= all.size(); ++i) {
    for (size_t j = i; j <= all.size(); ++j) {
      SseParser p;
      auto got = parse({all.substr(0, i), all.substr(i, j - i), all.substr(j)}, &p);
      if (got != kExpected) ++failures;
    }
  }
  BOOST_TEST(failures == 0u);
}

BOOST_AUTO_TEST_CASE(one_byte_at_a_time) {
  SseParser p;
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < kStream.size(); ++i) bytes.push_back(std::string_view(kStream).substr(i, 1));
  BOOST_TEST(parse(bytes, &p) == kExpected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bom_only_at_the_start) {
  // A BOM later in the stream is data; a partial BOM at the start is not a BOM.
  BOOST_TEST(parse("data: \xEF\xBB\xBFx\n\n") == std::vector<std::string>{"message||\xEF\xBB\xBFx"});
  BOOST_TEST(parse("\xEF\xBB" "data: x\n\n").empty());  // the line's field is "\xEF\xBB" "data"
  BOOST_TEST(parse("\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\n").empty());
}

BOOST_AUTO_TEST_CASE(cr_then_lf_in_separate_feeds_is_one_line_end) {
  SseParser p;
  auto got = parse({"data: a\r", "\n", "\r", "\n"}, &p);
  BOOST_TEST(got == std::vector<std::string>{"message||a"}, boost::test_tools::per_element());
  BOOST_TEST(!p.pending());
}

BOOST_AUTO_TEST_CASE(raw_lines_are_kept_for_failures) {
  SseParser p;
  std::string raw;
  p.feed("event: x\ndata: {broken\n\n", [&raw](const SseEvent& e) { raw = e.raw; });
  BOOST_TEST(raw == "event: x\ndata: {broken");
}

// The parser reuses its strings from one event to the next: nothing of an
// event (its type, id, data or raw lines) reaches the events after it.
BOOST_AUTO_TEST_CASE(each_event_holds_only_its_own_fields) {
  const std::string long_data(5000, 'x');
  SseParser p;
  std::vector<SseEvent> got;
  p.feed("event: content_block_delta_long_name\nid: 41\ndata: " + long_data + "\ndata: more\n\n" +
             "data: {}\n\n" + "event: ping\ndata: p\n\n" + "id: 42\ndata:\n\n",
         [&got](const SseEvent& e) { got.push_back(e); });
  BOOST_TEST_REQUIRE(got.size() == 4u);
  BOOST_TEST(got[0].type == "content_block_delta_long_name");
  BOOST_TEST(got[0].id == "41");
  BOOST_TEST(got[0].data == long_data + "\nmore");
  BOOST_TEST(got[0].raw.size() == SseParser::kRawKept);
  BOOST_TEST(got[0].raw.rfind("event: content_block_delta_long_name\nid: 41\ndata: xxx", 0) == 0u);
  BOOST_TEST(got[1].type == "message");
  BOOST_TEST(got[1].id == "");
  BOOST_TEST(got[1].data == "{}");
  BOOST_TEST(got[1].raw == "data: {}");
  BOOST_TEST(got[2].type == "ping");
  BOOST_TEST(got[2].data == "p");
  BOOST_TEST(got[2].raw == "event: ping\ndata: p");
  BOOST_TEST(got[3].type == "message");
  BOOST_TEST(got[3].id == "42");
  BOOST_TEST(got[3].data == "");
  BOOST_TEST(got[3].raw == "id: 42\ndata:");
}

}  // namespace
}  // namespace carapace
