// The configuration keys of the bounds on what servers send (docs/config.md,
// "Limits"): their defaults, how they are read, refused and stored.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/config.h"
#include "tests/support/printing.h"

using namespace carapace;

BOOST_AUTO_TEST_SUITE(config_bounds)

BOOST_AUTO_TEST_CASE(defaults_are_documented_ones) {
  Config c;
  std::vector<std::string> warnings;
  CHECK_OK(parse_config("{}", "c.json", &c, &warnings));
  BOOST_TEST(c.provider.max_stream_ms == 300'000u);
  BOOST_TEST(c.provider.idle_timeout_ms == 60'000u);
  BOOST_TEST(c.provider.max_line_bytes == 16u << 20);
  BOOST_TEST(c.provider.max_response_bytes == 64u << 20);
  BOOST_TEST(c.provider.max_tool_calls == 256u);
  BOOST_TEST(c.provider.max_stored_body_bytes == 16u << 20);
  BOOST_TEST(c.retry.max_delay_ms == 30'000u);
  CHECK_OK(parse_config(R"({"mcp_servers": {"s": {"command": "x"}}})", "c.json", &c, &warnings));
  BOOST_REQUIRE(c.mcp_servers.size() == 1u);
  BOOST_TEST(c.mcp_servers[0].max_message_bytes == 64u << 20);
  BOOST_TEST(c.mcp_servers[0].max_stderr_bytes == 4u << 20);
  BOOST_TEST(c.mcp_servers[0].stderr_lines_per_second == 100u);
}

BOOST_AUTO_TEST_CASE(they_are_read_stored_and_enter_the_digest) {
  Config c;
  std::vector<std::string> warnings;
  CHECK_OK(
      parse_config(R"({"provider": {"max_stream_ms": 1000, "max_line_bytes": 2048, "max_response_bytes": 4096,
                                         "max_tool_calls": 3, "max_stored_body_bytes": 8192},
                            "mcp_servers": {"s": {"command": "x", "max_message_bytes": 5000,
                                                  "max_stderr_bytes": 0, "stderr_lines_per_second": 7}}})",
                   "c.json", &c, &warnings));
  BOOST_TEST(warnings.empty());
  BOOST_TEST(c.provider.max_stream_ms == 1000u);
  BOOST_TEST(c.provider.max_line_bytes == 2048u);
  BOOST_TEST(c.provider.max_response_bytes == 4096u);
  BOOST_TEST(c.provider.max_tool_calls == 3u);
  BOOST_TEST(c.provider.max_stored_body_bytes == 8192u);
  BOOST_TEST(c.mcp_servers[0].max_message_bytes == 5000u);
  BOOST_TEST(c.mcp_servers[0].max_stderr_bytes == 0u);
  BOOST_TEST(c.mcp_servers[0].stderr_lines_per_second == 7u);
  nlohmann::json j = config_to_json(c);
  BOOST_TEST(j["provider"]["max_tool_calls"] == 3);
  BOOST_TEST(j["provider"]["max_stored_body_bytes"] == 8192);
  BOOST_TEST(j["mcp_servers"]["s"]["stderr_lines_per_second"] == 7);
  Config back;
  CHECK_OK(parse_config(j.dump(), "stored", &back, &warnings));
  BOOST_TEST(config_to_json(back).dump() == j.dump());
  // Each enters the configuration digest, as the other provider keys do.
  for (auto edit :
       {+[](Config& x) { x.provider.max_stream_ms = 1; }, +[](Config& x) { x.provider.max_line_bytes = 1; },
        +[](Config& x) { x.provider.max_response_bytes = 1; },
        +[](Config& x) { x.provider.max_tool_calls = 1; },
        +[](Config& x) { x.provider.max_stored_body_bytes = 1; },
        +[](Config& x) { x.mcp_servers[0].max_message_bytes = 1; },
        +[](Config& x) { x.mcp_servers[0].max_stderr_bytes = 1; },
        +[](Config& x) { x.mcp_servers[0].stderr_lines_per_second = 1; }}) {
    Config changed = c;
    edit(changed);
    BOOST_TEST(config_digest(changed) != config_digest(c));
  }
}

BOOST_AUTO_TEST_CASE(bad_values_are_refused_naming_the_key) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {R"({"provider": {"max_stream_ms": 0}})",
       "c.json: provider.max_stream_ms: must be a whole number from 1"},
      {R"({"provider": {"max_line_bytes": 100}})",
       "c.json: provider.max_line_bytes: must be a whole number from 1024"},
      {R"({"provider": {"max_response_bytes": "big"}})",
       "c.json: provider.max_response_bytes: must be a whole number from 1024"},
      {R"({"provider": {"max_tool_calls": 0}})",
       "c.json: provider.max_tool_calls: must be a whole number from 1 to 1000000"},
      {R"({"provider": {"max_stored_body_bytes": -1}})",
       "c.json: provider.max_stored_body_bytes: must be a whole number from 1024"},
      {R"({"mcp_servers": {"s": {"command": "x", "max_message_bytes": 10}}})",
       "c.json: mcp_servers.s.max_message_bytes: must be a whole number from 1024, got 10"},
      {R"({"mcp_servers": {"s": {"command": "x", "max_stderr_bytes": -5}}})",
       "c.json: mcp_servers.s.max_stderr_bytes: must be a whole number from 0, got -5"},
      {R"({"mcp_servers": {"s": {"command": "x", "stderr_lines_per_second": 1.5}}})",
       "c.json: mcp_servers.s.stderr_lines_per_second: must be a whole number from 0, got 1.5"},
  };
  for (const auto& c : cases) {
    Config config;
    std::vector<std::string> warnings;
    Status s = parse_config(c.text, "c.json", &config, &warnings);
    BOOST_TEST(s.is_invalid_argument(), c.text);
    BOOST_TEST(s.message().find(c.message) == 0u, s.message() << " | expected: " << c.message);
  }
}

BOOST_AUTO_TEST_SUITE_END()
