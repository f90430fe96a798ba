// StoredSpanReader against span_from_json(parse_stored_json()): the same
// spans from the same texts, the same refusals, and spans read back in the
// store's order put in the order a builder gives them.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include "actors/collector/span_builder.h"
#include "actors/collector/stored_span.h"
#include "base/bounded_json.h"
#include "base/limits.h"
#include "tests/support/session_builder.h"

using namespace carapace;
using carapace::testing::SessionBuilder;

namespace {

// Spans of every shape a session gives: nested calls, a hook, span events
// (a trim, a fault, a crash), a resume with a link, retries.
std::vector<Span> varied_spans() {
  SessionBuilder b;
  b.start().turn({"shell", "read_file"});
  b.add(TurnStarted{2});
  b.add(LlmRequested{.turn = 2, .attempt = 1, .model = "m1"});
  b.add(LlmFailed{.turn = 2, .attempt = 1, .http_status = 503, .error = "unavailable", .will_retry = true});
  b.add(LlmRequested{.turn = 2, .attempt = 2, .model = "m1"});
  b.add(LlmResponded{
      .turn = 2, .attempt = 2, .tool_calls = {{"c9", "shell", JsonText{"{\"command\":\"ls\"}"}}}});
  b.add(HookDecided{
      .hook_event = "PreToolUse", .hook_name = "guard", .decision = "allow", .tool_call_id = "c9"});
  b.add(ContextTrimmed{.first_index = 1, .messages_removed = 2, .chars_before = 900, .chars_after = 300});
  b.add(
      FaultInjected{.point = "provider.before_request", .action = "error", .detail = "HTTP 503", .turn = 2});
  b.add(ToolRequested{"c9", "shell", JsonText{"{\"command\":\"ls\"}"}});
  b.add(SessionResumed{.checkpoint_seq = 3, .checkpoint_turn = 1, .mode = "step", .pid = 42});
  b.add(ToolCompleted{
      .call_id = "c9", .tool = "shell", .output = "lost", .is_error = true, .interrupted = true});
  b.commit();
  return build_spans("s1", b.events());
}

Status read_as_before(const std::string& text, Span* out) {
  nlohmann::json j = parse_stored_json(text);
  if (j.is_discarded()) return Status::corruption("span: not JSON");
  return span_from_json(std::move(j), out);
}

// A value `depth` levels deep: empty arrays, or objects around a number.
std::string nested_arrays(int depth) {
  return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
}
std::string nested_objects(int depth) {
  std::string text;
  for (int k = 0; k < depth; ++k) text += "{\"a\":";
  return text + "1" + std::string(static_cast<size_t>(depth), '}');
}

// Text of every kind a string can hold: printable ASCII, what JSON escapes,
// control characters, DEL, UTF-8 of two to four bytes, and bytes that are
// not UTF-8 (a lone continuation byte, a cut-short sequence, 0xff).
std::string random_text(std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "a",    "Z",    "7",        " ",    "-",           "\"",       "\\",           "/",
      "\n",   "\t",   "\x01",     "\x1f", "\x7f",        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
      "\x80", "\xc3", "\xe2\x82", "\xff", "\xed\xa0\x80"};
  std::string out;
  const size_t n = rng() % 12;
  for (size_t i = 0; i < n; ++i) out += pieces[rng() % pieces.size()];
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stored_span)

// The collector stores span_json_text(); readers were written against
// span_to_json().dump(): the two must be the same bytes.
BOOST_AUTO_TEST_CASE(the_stored_text_is_the_json_values_dump) {
  auto dump = [](const Span& s) {
    return span_to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::vector<Span> spans = varied_spans();
  for (const Span& s : spans) BOOST_TEST(span_json_text(s) == dump(s));
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3000; ++i) {
    Span s = spans[static_cast<size_t>(i) % spans.size()];
    for (std::string* text :
         {&s.trace_id, &s.span_id, &s.parent_id, &s.session, &s.kind, &s.name, &s.status}) {
      if (rng() % 2) *text = random_text(rng);
    }
    s.open_seq = rng() % 3 ? rng() % 1000 : rng();
    s.close_seq = rng() % 3 ? 0 : rng();
    s.start_us = static_cast<int64_t>(rng());
    s.end_us = rng() % 2 ? 0 : -static_cast<int64_t>(rng() % 1000);
    s.attrs[random_text(rng)] = random_text(rng);
    s.attrs["i"] = -static_cast<int64_t>(rng() % 100000);
    s.attrs["u"] = rng();
    s.attrs["f"] = static_cast<double>(rng() % 1000) / 7.0;
    s.attrs["b"] = rng() % 2 == 0;
    for (size_t k = rng() % 3; k > 0; --k) {
      s.events.push_back(SpanEvent{.seq = rng(),
                                   .ts_us = static_cast<int64_t>(rng()),
                                   .name = random_text(rng),
                                   .attrs = {{random_text(rng), static_cast<int64_t>(rng() % 9) - 4}}});
    }
    for (size_t k = rng() % 3; k > 0; --k) {
      s.links.push_back(SpanLink{.trace_id = random_text(rng),
                                 .span_id = random_text(rng),
                                 .session = random_text(rng),
                                 .seq = rng(),
                                 .reason = random_text(rng)});
    }
    const std::string expected = dump(s);
    BOOST_TEST(span_json_text(s) == expected);
  }
}

BOOST_AUTO_TEST_CASE(a_stored_span_reads_back_as_the_span_that_was_stored) {
  std::vector<Span> spans = varied_spans();
  BOOST_REQUIRE(spans.size() >= 8u);
  bool links = false, events = false;
  StoredSpanReader reader;
  for (const Span& s : spans) {
    const std::string text = span_to_json(s).dump();
    Span back;
    Status read = reader.read(text, &back);
    BOOST_TEST(read.ok(), read.to_string());
    BOOST_TEST((back == s), text);
    BOOST_TEST(span_to_json(back).dump() == text);  // numbers kept their kinds
    links = links || !s.links.empty();
    events = events || !s.events.empty();
  }
  BOOST_TEST(links);
  BOOST_TEST(events);
}

BOOST_AUTO_TEST_CASE(attributes_keep_every_number_kind_and_escape_as_the_json_parser_gives_them) {
  Span s = varied_spans().front();
  SpanAttrs::from_json(nlohmann::json::parse(R"({"neg": -7, "zero": 0, "big": 18446744073709551615, "pos": 42,
      "f": 0.1, "tiny": 5e-324, "huge": 1e300, "neg_f": -2.5, "t": true, "no": false, "nothing": null,
      "s": "caf\u00e9 \"q\" \\ \n\t\u0001 \ud83d\ude00", "list": [1, -1, 1.5, "x", [], {}],
      "obj": {"b": 1, "a": {"c": null}}})"),
                       &s.attrs);
  s.events.push_back(SpanEvent{.seq = 9, .ts_us = -5, .name = "x", .attrs = {{"n", -1}, {"u", 3}}});
  const std::string text = span_to_json(s).dump();
  Span ours, before;
  StoredSpanReader reader;
  BOOST_REQUIRE(reader.read(text, &ours).ok());
  BOOST_REQUIRE(read_as_before(text, &before).ok());
  BOOST_TEST((ours == before));
  BOOST_TEST(ours.attrs.dump() == before.attrs.dump());
  BOOST_TEST(ours.attrs["neg"].is_number_integer() == true);
  BOOST_TEST(ours.attrs["neg"].is_number_unsigned() == false);
  BOOST_TEST(ours.attrs["pos"].is_number_unsigned() == true);
  BOOST_TEST(ours.attrs["big"].get<uint64_t>() == UINT64_MAX);
  BOOST_TEST(ours.attrs["f"].is_number_float() == true);
  BOOST_TEST(ours.events.back().attrs["u"].is_number_unsigned() == true);
  // A repeated key keeps its last value, as nlohmann_json's parser does.
  std::string twice = text;
  twice.replace(twice.find("\"attrs\":{") + 9, 0, "\"pos\":1,\"zzz\":2,\"zzz\":3,");
  BOOST_REQUIRE(reader.read(twice, &ours).ok());
  BOOST_REQUIRE(read_as_before(twice, &before).ok());
  BOOST_TEST(ours.attrs.dump() == before.attrs.dump());
  BOOST_TEST(ours.attrs["zzz"] == 3);
}

// A store a stranger wrote may hold a span's attributes in any order, and
// many of them: they read as the JSON parser reads them (sorted, a repeated
// key's last value), in n log n rather than a sorted insert each.
BOOST_AUTO_TEST_CASE(attributes_in_a_strangers_order_read_as_the_json_parser_reads_them) {
  Span s = varied_spans().front();
  std::string text = span_json_text(s);
  std::string members;
  constexpr int kKeys = 200'000;
  for (int i = kKeys; i > 0; --i)
    members += "\"k" + std::to_string(i % 1000) + "_" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  members += "\"k5_5\":\"last\",\"a\":1,\"a\":2,";
  text.replace(text.find("\"attrs\":{") + 9, 0, members);
  StoredSpanReader reader;
  Span ours, before;
  BOOST_REQUIRE(reader.read(text, &ours).ok());
  BOOST_REQUIRE(read_as_before(text, &before).ok());
  BOOST_TEST(ours.attrs.size() == before.attrs.size());
  BOOST_TEST(ours.attrs.size() >= static_cast<size_t>(kKeys));
  BOOST_TEST((ours.attrs == before.attrs));
  BOOST_TEST(ours.attrs["k5_5"] == "last");
  BOOST_TEST(ours.attrs["a"] == 2);
}

BOOST_AUTO_TEST_CASE(it_refuses_what_span_from_json_refuses_and_names_the_field) {
  const nlohmann::json good = span_to_json(varied_spans()[1]);
  StoredSpanReader reader;
  Span out;
  auto refused = [&](const std::string& text, const std::string& says) {
    Status ours = reader.read(text, &out);
    BOOST_TEST(ours.is_corruption(), text.substr(0, 80) << ": " << ours.to_string());
    BOOST_TEST(ours.message().find(says) != std::string::npos, ours.message());
    BOOST_TEST(!read_as_before(text, &out).ok(), text.substr(0, 80));
  };
  refused("", "not JSON");
  refused("{\"trace_id\":", "not JSON");
  refused(good.dump() + "x", "not JSON");
  refused("[1,2]", "not a JSON object");
  for (const char* field : {"trace_id", "span_id", "parent_id", "session", "kind", "name", "open_seq",
                            "close_seq", "start_us", "end_us", "status"}) {
    nlohmann::json j = good;
    j.erase(field);
    refused(j.dump(), std::string("'") + field + "'");
    j = good;
    j[field] = nlohmann::json::array();
    refused(j.dump(), std::string("'") + field + "'");
  }
  nlohmann::json j = good;
  j["attrs"] = 3;
  refused(j.dump(), "'attrs'");
  j = good;
  j["events"] = nlohmann::json::object();
  refused(j.dump(), "'events'");
  j = good;
  j["links"] = nlohmann::json::array({{{"trace_id", "t"}}});
  refused(j.dump(), "'span_id'");
  j = good;
  j["events"] = nlohmann::json::array({{{"seq", 1}, {"ts_us", 2}}});
  refused(j.dump(), "'name'");
  // An event's attributes, when it has them, are an object.
  j = good;
  j["events"] = nlohmann::json::array({{{"seq", 1}, {"ts_us", 2}, {"name", "x"}, {"attrs", {1, 2}}}});
  refused(j.dump(), "'attrs'");
  // Stricter than before: a negative seq no longer reads as a huge one.
  j = good;
  j["open_seq"] = -1;
  BOOST_TEST(reader.read(j.dump(), &out).message().find("'open_seq'") != std::string::npos);
}

// simdjson counts a container that holds a scalar as one level more than
// its brackets: with objects that hold one, the bound is parse_stored_json's
// to the level; with empty arrays innermost it admits one level more.
BOOST_AUTO_TEST_CASE(its_depth_bound_is_the_stored_json_bound) {
  const std::string good = span_to_json(varied_spans()[1]).dump();
  auto with_deep = [&](const std::string& value) {
    std::string text = good;
    text.replace(text.find("\"attrs\":{") + 9, 0, "\"deep\":" + value + ",");
    return text;
  };
  StoredSpanReader reader;
  for (int depth = limits::kJsonDepth - 3; depth <= limits::kJsonDepth + 3; ++depth) {
    // The span and its attrs are two levels; `depth` in all.
    const std::string objects = with_deep(nested_objects(depth - 2));
    Span ours, before;
    bool ok = reader.read(objects, &ours).ok();
    BOOST_TEST(ok == read_as_before(objects, &before).ok(), "depth " << depth);
    BOOST_TEST(ok == (depth <= limits::kJsonDepth), "depth " << depth);
    if (ok) BOOST_TEST((ours == before));
    const std::string arrays = with_deep(nested_arrays(depth - 2));
    BOOST_TEST(read_as_before(arrays, &before).ok() == (depth <= limits::kJsonDepth), "depth " << depth);
    BOOST_TEST(reader.read(arrays, &ours).ok() == (depth <= limits::kJsonDepth + 1), "depth " << depth);
  }
  // Far deeper than the bound, as a stranger's store could hold: refused, no crash.
  Span out;
  BOOST_TEST(reader.read(with_deep(nested_arrays(100000)), &out).is_corruption());
  BOOST_TEST(reader.read(with_deep(nested_objects(100000)), &out).is_corruption());
}

BOOST_AUTO_TEST_CASE(one_reader_reads_a_large_span_then_small_ones) {
  std::vector<Span> spans = varied_spans();
  spans[1].attrs["big"] = std::string(3 << 20, 'x');  // beyond the parser's first capacity
  StoredSpanReader reader;
  for (int round = 0; round < 2; ++round) {
    for (const Span& s : spans) {
      Span back;
      BOOST_REQUIRE(reader.read(span_to_json(s).dump(), &back).ok());
      BOOST_TEST((back == s));
    }
  }
  // The parser grew for the large span; its depth bound did not move.
  std::string deep = span_to_json(spans[0]).dump();
  deep.replace(deep.find("\"attrs\":{") + 9, 0, "\"deep\":" + nested_arrays(limits::kJsonDepth + 5) + ",");
  Span out;
  BOOST_TEST(reader.read(deep, &out).is_corruption());
}

BOOST_AUTO_TEST_CASE(spans_in_the_stores_order_are_put_in_the_order_they_were_built) {
  const std::vector<Span> built = varied_spans();
  std::vector<Span> stored = built;  // the store's key order: (open_seq, span_id)
  std::sort(stored.begin(), stored.end(), [](const Span& a, const Span& b) {
    return std::tie(a.open_seq, a.span_id) < std::tie(b.open_seq, b.span_id);
  });
  auto ids = [](const std::vector<Span>& spans) {
    std::vector<std::string> out;
    for (const auto& s : spans) out.push_back(s.name + "@" + std::to_string(s.open_seq));
    return out;
  };
  // At least one seq opens two spans, whose order the ids do not give.
  bool shared = false;
  for (size_t i = 1; i < built.size(); ++i) shared = shared || built[i].open_seq == built[i - 1].open_seq;
  BOOST_REQUIRE(shared);
  order_as_built(&stored);
  BOOST_TEST(ids(stored) == ids(built), "store order");
  // In seq order, each seq's spans reversed: the ids' order could agree with
  // the builder's by chance, this one does not.
  std::vector<Span> reversed(built.rbegin(), built.rend());
  std::stable_sort(reversed.begin(), reversed.end(),
                   [](const Span& a, const Span& b) { return a.open_seq < b.open_seq; });
  BOOST_REQUIRE(ids(reversed) != ids(built));
  order_as_built(&reversed);
  BOOST_TEST(ids(reversed) == ids(built), "each seq's spans reversed");
  // Any other order too.
  std::vector<Span> shuffled = built;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  order_as_built(&shuffled);
  BOOST_TEST(ids(shuffled) == ids(built), "shuffled");
}

BOOST_AUTO_TEST_SUITE_END()
