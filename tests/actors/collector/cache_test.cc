// Prompt-cache regions read from request bodies, and the busts, lapses and
// misses analyze_cache names (actors/collector/cache_regions.h,
// cache_analyze.h).
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "actors/collector/cache_analyze.h"
#include "actors/collector/cache_regions.h"

using namespace carapace;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kMarker = {{"type", "ephemeral"}};

// An anthropic body: breakpoints on the tools, the system prompt and the
// last message, as provider.cache {"tools", "system", "last_messages": 1}
// renders them.
ojson anthropic(const ojson& schema, const std::string& system, int messages, bool breakpoints = true) {
  ojson tool = {{"name", "shell"}, {"description", "Runs a command"}, {"input_schema", schema}};
  if (breakpoints) tool["cache_control"] = kMarker;
  ojson sys = ojson::array({{{"type", "text"}, {"text", system}}});
  if (breakpoints) sys[0]["cache_control"] = kMarker;
  ojson msgs = ojson::array();
  for (int i = 0; i < messages; ++i) {
    ojson block = {{"type", "text"}, {"text", "message " + std::to_string(i) + std::string(600, 'x')}};
    msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", ojson::array({block})}});
  }
  if (breakpoints && messages > 0) msgs.back()["content"].back()["cache_control"] = kMarker;
  return {{"max_tokens", 4096}, {"messages", msgs}, {"model", "claude-x"}, {"stream", true},
          {"system", sys},      {"tools", ojson::array({tool})}};
}

const ojson kSchema = {{"type", "object"}, {"properties", {{"command", {{"type", "string"}}}}}};
const ojson kSchemaOtherOrder = {{"properties", {{"command", {{"type", "string"}}}}}, {"type", "object"}};

CacheRequest request(uint64_t seq, const std::string& body, int64_t start_s, uint64_t cache_read = 0,
                     uint64_t cache_write = 0, std::string_view format = "anthropic") {
  CacheRequest r{.seq = seq,
                 .turn = seq,
                 .attempt = 1,
                 .start_us = start_s * 1'000'000,
                 .model = "claude-x",
                 .ok = true,
                 .input = 100,
                 .cache_read = cache_read,
                 .cache_write = cache_write,
                 .body = body};
  r.regions = cache_regions(body, format);
  return r;
}

std::vector<std::string> patterns(const std::vector<Finding>& fs) {
  std::vector<std::string> out;
  for (const auto& f : fs) out.push_back(f.pattern + (f.detail.is_object() && f.detail.contains("region")
                                                          ? ":" + f.detail["region"].get<std::string>()
                                                          : ""));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cache_regions_suite)

BOOST_AUTO_TEST_CASE(anthropic_regions_come_in_prompt_order_with_their_breakpoints) {
  std::string body = anthropic(kSchema, "You are careful.", 3).dump();
  RequestRegions r = cache_regions(body, "anthropic");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.model == "claude-x");
  std::vector<std::string> names;
  for (const auto& x : r.regions) names.push_back(x.name + (x.breakpoint ? "*" : ""));
  BOOST_TEST(names == (std::vector<std::string>{"tools*", "system*", "messages[0]", "messages[1]", "messages[2]*"}),
             boost::test_tools::per_element());
  BOOST_TEST(r.cacheable == 5u);
  BOOST_TEST(r.ttl == "5m");
  // Each region is the exact bytes of its value in the body.
  BOOST_TEST(body.substr(r.regions[1].offset, r.regions[1].size) ==
             ojson(anthropic(kSchema, "You are careful.", 3)["system"]).dump());
  // Guessed from the body's shape as well.
  BOOST_TEST(cache_regions(body).format == "anthropic");
}

BOOST_AUTO_TEST_CASE(a_breakpoint_moving_forward_leaves_fingerprints_alone_and_only_the_last_counts) {
  RequestRegions two = cache_regions(anthropic(kSchema, "S", 2).dump(), "anthropic");
  RequestRegions four = cache_regions(anthropic(kSchema, "S", 4).dump(), "anthropic");
  // messages[1] carried the marker in the first request, not in the second.
  BOOST_TEST(two.regions[3].breakpoint);
  BOOST_TEST(!four.regions[3].breakpoint);
  for (size_t i = 0; i < two.regions.size(); ++i) BOOST_TEST(two.regions[i].fingerprint == four.regions[i].fingerprint);
  BOOST_TEST(prefix_fingerprint(two.regions, 4) == prefix_fingerprint(four.regions, 4));
  BOOST_TEST(prefix_fingerprint(two.regions, 4) != prefix_fingerprint(four.regions, 5));
  // Without any breakpoint nothing is cacheable.
  BOOST_TEST(cache_regions(anthropic(kSchema, "S", 2, false).dump(), "anthropic").cacheable == 0u);
  // A one-hour breakpoint is read.
  ojson b = anthropic(kSchema, "S", 2);
  b["messages"][1]["content"][0]["cache_control"]["ttl"] = "1h";
  BOOST_TEST(cache_regions(b.dump(), "anthropic").ttl == "1h");
}

BOOST_AUTO_TEST_CASE(a_schema_property_named_cache_control_is_part_of_the_fingerprint) {
  ojson s1 = {{"type", "object"}, {"properties", {{"cache_control", {{"type", "string"}}}}}};
  ojson s2 = {{"type", "object"}, {"properties", {{"cache_control", {{"type", "number"}}}}}};
  BOOST_TEST(cache_regions(anthropic(s1, "S", 1).dump(), "anthropic").regions[0].fingerprint !=
             cache_regions(anthropic(s2, "S", 1).dump(), "anthropic").regions[0].fingerprint);
  // And whitespace around a marker goes with it.
  BOOST_TEST(fingerprinted_bytes(R"([{"a":1 , "cache_control" : {"type":"ephemeral"} }])") == R"([{"a":1 }])");
  BOOST_TEST(fingerprinted_bytes(R"({"cache_control":{},"content":[{"cache_control":{},"t":2}]})") ==
             R"({"content":[{"t":2}]})");
}

BOOST_AUTO_TEST_CASE(openai_regions_name_the_system_message_and_cache_everything) {
  ojson body = {{"messages",
                 {{{"role", "system"}, {"content", "You are careful."}},
                  {{"role", "user"}, {"content", "hello"}},
                  {{"role", "assistant"}, {"content", "hi"}}}},
                {"model", "gpt-x"},
                {"prompt_cache_key", "team-a"},
                {"tools", {{{"type", "function"}, {"function", {{"name", "shell"}, {"parameters", kSchema}}}}}}};
  RequestRegions r = cache_regions(body.dump());
  BOOST_TEST(r.format == "openai");
  BOOST_TEST(r.prompt_cache_key == "team-a");
  std::vector<std::string> names;
  for (const auto& x : r.regions) names.push_back(x.name);
  BOOST_TEST(names == (std::vector<std::string>{"tools", "system", "messages[1]", "messages[2]"}),
             boost::test_tools::per_element());
  BOOST_TEST(r.cacheable == 4u);
}

BOOST_AUTO_TEST_CASE(bodies_that_are_not_requests_give_an_error_not_a_crash) {
  for (std::string bad : {std::string(""), std::string("[1,2]"), std::string("{\"messages\": 3}"),
                          std::string("{\"messages\": [1, 2"), std::string("{\"a\":\"\\"),
                          "{\"messages\": [" + std::string(200, '[') + std::string(200, ']') + "]}",
                          std::string("{\"tools\": [}, \"x\": 1}")}) {
    RequestRegions r = cache_regions(bad, "anthropic");
    BOOST_TEST(!r.error.empty(), bad.substr(0, 40));
    BOOST_TEST(r.regions.empty());
  }
  // Strangers' bodies are linear to read: a 4 MiB string.
  std::string big = "{\"system\":\"" + std::string(4 << 20, 'a') + "\",\"messages\":[]}";
  BOOST_TEST(cache_regions(big).regions.size() == 1u);
}

BOOST_AUTO_TEST_CASE(first_difference_skips_markers_and_finds_the_byte) {
  auto [a, b] = first_difference(R"([{"t":"abc","cache_control":{}}])", R"([{"t":"abd"}])");
  BOOST_TEST(a == 9u);
  BOOST_TEST(b == 9u);
  std::string x = R"([{"cache_control":{},"t":1}])", y = R"([{"t":1}])";
  auto same = first_difference(x, y);
  BOOST_TEST(same.first == x.size());
  BOOST_TEST(same.second == y.size());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cache_analyze_suite)

BOOST_AUTO_TEST_CASE(a_conversation_that_grows_with_cache_reads_is_clean) {
  std::vector<CacheRequest> rs = {request(1, anthropic(kSchema, "S", 1).dump(), 0, 0, 900),
                                  request(2, anthropic(kSchema, "S", 3).dump(), 10, 900, 400),
                                  request(3, anthropic(kSchema, "S", 5).dump(), 20, 1300, 400)};
  BOOST_TEST(analyze_cache(rs).empty());
}

BOOST_AUTO_TEST_CASE(a_tool_schema_in_another_key_order_is_named_a_bust_of_the_tools_region) {
  std::string before = anthropic(kSchema, "S", 1).dump();
  std::string after = anthropic(kSchemaOtherOrder, "S", 3).dump();
  auto fs = analyze_cache({request(1, before, 0, 0, 900), request(2, after, 10, 0, 1300)});
  BOOST_TEST(patterns(fs) == (std::vector<std::string>{"cache_bust:tools"}), boost::test_tools::per_element());
  BOOST_REQUIRE(fs.size() == 1u);
  // The offsets point at the first byte that differs: "type" became "properties".
  size_t a = fs[0].detail["offset_before"], b = fs[0].detail["offset_after"];
  BOOST_TEST(before.substr(a, 4) == "type");
  BOOST_TEST(after.substr(b, 4) == "prop");
  BOOST_TEST(before.substr(a - 40, 40) == after.substr(b - 40, 40));
  BOOST_TEST(fs[0].seqs == (std::vector<uint64_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(fs[0].detail["after"].get<std::string>().find("⟦properties") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_timestamp_in_the_system_prompt_is_named_a_bust_of_the_system_region) {
  auto fs = analyze_cache({request(1, anthropic(kSchema, "Now: 2026-11-27T06:00:01Z", 1).dump(), 0, 0, 900),
                           request(2, anthropic(kSchema, "Now: 2026-11-27T06:00:09Z", 3).dump(), 8, 300, 900)});
  BOOST_TEST(patterns(fs) == (std::vector<std::string>{"cache_bust:system"}), boost::test_tools::per_element());
  BOOST_TEST(fs[0].message.find("region system changed") != std::string::npos, fs[0].message);
}

BOOST_AUTO_TEST_CASE(a_message_the_next_request_no_longer_has_is_a_bust_with_its_cause) {
  ojson trimmed = anthropic(kSchema, "S", 3);
  trimmed["messages"].erase(0);
  CacheRequest b = request(2, trimmed.dump(), 10);
  b.trimmed_seq = 17;
  auto fs = analyze_cache({request(1, anthropic(kSchema, "S", 3).dump(), 0, 0, 900), b});
  BOOST_TEST(patterns(fs) == (std::vector<std::string>{"cache_bust:messages[0]"}), boost::test_tools::per_element());
  // The trimmed conversation starts with what was its second message.
  BOOST_TEST(fs[0].message.find("trimmed at seq 17") != std::string::npos, fs[0].message);
}

BOOST_AUTO_TEST_CASE(a_gap_past_the_lifetime_is_a_ttl_lapse_and_within_it_a_provider_miss) {
  std::string one = anthropic(kSchema, "S", 1).dump(), three = anthropic(kSchema, "S", 3).dump();
  // 6 minutes later, nothing read: the 5-minute cache lapsed.
  BOOST_TEST(patterns(analyze_cache({request(1, one, 0, 0, 900), request(2, three, 360, 0, 1300)})) ==
                 (std::vector<std::string>{"ttl_lapse"}),
             boost::test_tools::per_element());
  // --cache-ttl 10m: it should have hit.
  BOOST_TEST(patterns(analyze_cache({request(1, one, 0, 0, 900), request(2, three, 360, 0, 1300)},
                                    CacheAnalyzeOptions{.ttl_ms = 600'000})) ==
                 (std::vector<std::string>{"provider_miss"}),
             boost::test_tools::per_element());
  // A one-hour breakpoint: the same.
  ojson hour = anthropic(kSchema, "S", 1);
  hour["messages"][0]["content"][0]["cache_control"]["ttl"] = "1h";
  BOOST_TEST(patterns(analyze_cache({request(1, hour.dump(), 0, 0, 900), request(2, three, 360, 0, 1300)})) ==
                 (std::vector<std::string>{"provider_miss"}),
             boost::test_tools::per_element());
  // Read from the cache: nothing to say, whatever the gap.
  BOOST_TEST(analyze_cache({request(1, one, 0, 0, 900), request(2, three, 360, 900, 400)}).empty());
  // A prefix too short to be cached, of which the provider wrote nothing: no miss.
  std::string tiny1 = anthropic(ojson::object(), "S", 0).dump(), tiny2 = anthropic(ojson::object(), "S", 0).dump();
  BOOST_TEST(analyze_cache({request(1, tiny1, 0), request(2, tiny2, 5)}).empty());
}

BOOST_AUTO_TEST_CASE(requests_of_another_model_or_that_failed_are_not_compared) {
  CacheRequest a = request(1, anthropic(kSchema, "S", 1).dump(), 0, 0, 900);
  CacheRequest b = request(2, anthropic(kSchemaOtherOrder, "S", 3).dump(), 10);
  b.model = "claude-y";
  BOOST_TEST(analyze_cache({a, b}).empty());
  b.model = "claude-x";
  b.ok = false;
  BOOST_TEST(analyze_cache({a, b}).empty());
}

BOOST_AUTO_TEST_CASE(anthropic_requests_without_breakpoints_are_reported_once_as_cache_off) {
  std::vector<CacheRequest> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(request(i + 1, anthropic(kSchema, "S", 2 * i + 8, false).dump(), i));
  BOOST_TEST(patterns(analyze_cache(rs)) == (std::vector<std::string>{"cache_off"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(openai_requests_bust_on_their_system_message) {
  auto body = [](const std::string& system, int n) {
    ojson msgs = ojson::array({{{"role", "system"}, {"content", system}}});
    for (int i = 0; i < n; ++i) msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(5000, 'y')}});
    return ojson{{"messages", msgs}, {"model", "claude-x"}, {"stream", true}}.dump();
  };
  auto fs = analyze_cache({request(1, body("at 06:00:01", 1), 0, 0, 0, "openai"),
                           request(2, body("at 06:00:09", 3), 8, 0, 0, "openai")});
  BOOST_TEST(patterns(fs) == (std::vector<std::string>{"cache_bust:system"}), boost::test_tools::per_element());
  // The same system message: a miss, since the prefix is past 1,024 tokens.
  fs = analyze_cache({request(1, body("S", 1), 0, 0, 0, "openai"), request(2, body("S", 3), 8, 0, 0, "openai")});
  BOOST_TEST(patterns(fs) == (std::vector<std::string>{"provider_miss"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
