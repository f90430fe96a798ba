// The pure parts of the MCP client: JSON-RPC lines, tool declarations and
// call results (actors/tool/mcp/mcp_jsonrpc.h, mcp_result.h).
#define BOOST_TEST_MODULE mcp_protocol_test
#include <boost/test/unit_test.hpp>

#include "actors/tool/mcp/mcp_jsonrpc.h"
#include "actors/tool/mcp/mcp_result.h"

using namespace carapace;
using nlohmann::json;
using Kind = mcp::Message::Kind;

BOOST_AUTO_TEST_CASE(lines_are_single_json_rpc_objects) {
  BOOST_TEST(mcp::request_line(7, "tools/list", json()) ==
             "{\"id\":7,\"jsonrpc\":\"2.0\",\"method\":\"tools/list\"}\n");
  BOOST_TEST(mcp::notification_line("notifications/initialized", json()) ==
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
  BOOST_TEST(mcp::error_line("a", -32601, "no") ==
             "{\"error\":{\"code\":-32601,\"message\":\"no\"},\"id\":\"a\",\"jsonrpc\":\"2.0\"}\n");
  // A newline inside a string is escaped: one message, one line.
  std::string line = mcp::request_line(1, "tools/call", {{"arguments", {{"text", "a\nb"}}}});
  BOOST_TEST(line.find('\n') == line.size() - 1);
  BOOST_TEST(mcp::initialize_params("1")["protocolVersion"] == "2025-11-25");
}

BOOST_AUTO_TEST_CASE(protocol_versions) {
  for (const char* v : {"2025-11-25", "2025-06-18", "2025-03-26"})
    BOOST_TEST(mcp::supported_protocol_version(v), v);
  for (const char* v : {"2024-11-05", "", "2025-11-26"}) BOOST_TEST(!mcp::supported_protocol_version(v), v);
}

BOOST_AUTO_TEST_CASE(messages_are_classified) {
  auto m = mcp::parse_message(R"({"jsonrpc":"2.0","id":3,"result":{"x":1}})");
  BOOST_TEST((m.kind == Kind::kResponse));
  BOOST_TEST(m.id == 3);
  BOOST_TEST(m.result["x"] == 1);
  m = mcp::parse_message(R"({"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad"}})"
                         "\r");
  BOOST_TEST((m.kind == Kind::kResponse));
  BOOST_TEST(m.is_error);
  BOOST_TEST(m.error_code == -32602);
  BOOST_TEST(m.error_message == "bad");
  m = mcp::parse_message(R"({"jsonrpc":"2.0","id":"s1","method":"roots/list"})");
  BOOST_TEST((m.kind == Kind::kRequest));
  BOOST_TEST(m.method == "roots/list");
  m = mcp::parse_message(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  BOOST_TEST((m.kind == Kind::kNotification));
  struct Bad {
    const char* line;
    const char* problem;
  } bad[] = {{"Server started on stdio", "not JSON"},
             {"[1,2]", "not a JSON object"},
             {R"({"id":1,"result":{}})", "not JSON-RPC 2.0"},
             {R"({"jsonrpc":"2.0","id":1.5,"result":{}})", "neither a string nor an integer"},
             {R"({"jsonrpc":"2.0","id":1})", "neither \"result\" nor \"error\""},
             {R"({"jsonrpc":"2.0","result":{}})", "neither a request nor a response"},
             {R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700}})", "an error without an id"},
             {R"({"jsonrpc":"2.0","method":5})", "\"method\" is not a string"}};
  for (const auto& b : bad) {
    m = mcp::parse_message(b.line);
    BOOST_TEST((m.kind == Kind::kInvalid), b.line);
    BOOST_TEST(m.problem.find(b.problem) != std::string::npos, b.line << " -> " << m.problem);
  }
}

BOOST_AUTO_TEST_CASE(server_names) {
  BOOST_TEST(mcp::validate_server_name("github").ok());
  BOOST_TEST(mcp::validate_server_name("my-server_2").ok());
  for (const char* bad : {"", "a b", "a__b", "x.y", "abcdefghijklmnopqrstuvwxy"}) {
    BOOST_TEST(!mcp::validate_server_name(bad).ok(), bad);
  }
  BOOST_TEST(mcp::qualified_tool_name("fs", "read_file") == "mcp__fs__read_file");
}

BOOST_AUTO_TEST_CASE(tool_declarations_are_checked) {
  json ok = {{"name", "read"},
             {"description", "Reads"},
             {"inputSchema",
              {{"type", "object"}, {"properties", {{"p", {{"type", "string"}}}}}, {"required", {"p"}}}},
             {"annotations", {{"readOnlyHint", true}}}};
  mcp::ToolInfo t;
  BOOST_REQUIRE(mcp::parse_tool("fs", ok, &t).ok());
  BOOST_TEST(t.read_only);
  BOOST_TEST(!t.idempotent);
  ToolSpec spec = mcp::tool_spec("fs", t);
  BOOST_TEST(spec.name == "mcp__fs__read");
  BOOST_TEST(spec.idempotent);
  BOOST_TEST(spec.description == "Reads");
  BOOST_TEST(json::parse(spec.schema.text) == ok["inputSchema"]);

  auto with = [&](const std::string& key, json value) {
    json e = ok;
    e[key] = std::move(value);
    return e;
  };
  struct Bad {
    json entry;
    const char* why;
  } bad[] = {
      {with("name", "read file"), "characters other than"},
      {with("name", std::string(60, 'a')), "longer than 64 characters"},
      {with("name", ""), "has no name"},
      {with("inputSchema", "object"), "inputSchema is missing or not a JSON object"},
      {with("inputSchema", {{"type", "array"}}), "\"type\" must be \"object\""},
      {with("inputSchema", {{"type", "object"}, {"properties", {1, 2}}}), "\"properties\" is not an object"},
      {with("inputSchema", {{"type", "object"}, {"required", "p"}}),
       "\"required\" is not an array of strings"},
  };
  for (const auto& b : bad) {
    Status s = mcp::parse_tool("fs", b.entry, &t);
    BOOST_TEST(!s.ok(), b.entry.dump());
    BOOST_TEST(s.message().find(b.why) != std::string::npos, s.message());
  }
  // A page keeps the good ones, says why it skipped the others, and gives the cursor.
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  std::string cursor;
  json page = {{"tools", {ok, with("inputSchema", {{"type", "array"}}), ok}}, {"nextCursor", "2"}};
  BOOST_REQUIRE(mcp::parse_tools_page("fs", page, &tools, &skipped, &cursor).ok());
  BOOST_TEST(tools.size() == 1u);
  BOOST_TEST(skipped.size() == 2u);  // the bad schema, and the duplicate
  BOOST_TEST(cursor == "2");
  BOOST_TEST(!mcp::parse_tools_page("fs", json::object(), &tools, &skipped, &cursor).ok());
}

BOOST_AUTO_TEST_CASE(call_results_become_text) {
  json r = {{"content",
             {{{"type", "text"}, {"text", "line"}},
              {{"type", "audio"}, {"data", "AAAA"}, {"mimeType", "audio/wav"}},
              {{"type", "resource_link"}, {"uri", "file:///x"}, {"name", "x"}},
              {{"type", "resource"}, {"resource", {{"uri", "file:///b"}, {"blob", "AAAAAAAA"}}}},
              {{"type", "video"}}}},
            {"structuredContent", {{"n", 1}}},
            {"isError", true}};
  ToolResult t = mcp::call_result(r, 1 << 20);
  BOOST_TEST(t.output ==
             "line\n[audio: audio/wav, 4 bytes of base64]\n[resource link: x file:///x]\n[resource: "
             "file:///b, 8 bytes "
             "of base64]\n[content block of type \"video\"]\n[structured content]\n{\"n\":1}");
  BOOST_TEST(t.is_error);
  BOOST_TEST(!t.truncated);
  BOOST_TEST(!mcp::call_result({{"content", json::array()}}, 100).is_error);
  BOOST_TEST(mcp::call_result("nope", 100).is_error);
  // Over the cap: head, the shell's marker, tail.
  t = mcp::call_result(
      {{"content", {{{"type", "text"}, {"text", std::string(1000, 'a') + std::string(1000, 'b')}}}}}, 200);
  BOOST_TEST(t.truncated);
  BOOST_TEST(t.original_bytes == 2000u);
  BOOST_TEST(t.output == std::string(100, 'a') + "\n[... 1,800 bytes truncated: kept 200 of 2,000 ...]\n" +
                             std::string(100, 'b'));
}
