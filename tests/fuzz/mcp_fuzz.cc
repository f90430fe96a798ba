// Fuzz target: a line an MCP server writes on stdout, as the client reads it
// (mcp::parse_message, actors/tool/mcp/mcp_jsonrpc.h), and what the client makes
// of a message that parses (actors/tool/mcp/mcp_client.cc, mcp_result.h): its
// answer to a server's request, a notification's params as logged, and a
// response's result read both as a tools/list page (tool declarations, the
// ToolSpec the model sees) and as a tools/call result (the text the model
// reads; its bound is small so that inputs reach the truncation).
//
// Checked: the client's answer to a request reads back as a response to the
// same id, and a tools/call result is no longer than its bound and a marker.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/tool/mcp/mcp_jsonrpc.h"
#include "actors/tool/mcp/mcp_result.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;
using nlohmann::json;

constexpr uint64_t kMaxOutputBytes = 256;
// The longest truncation marker: "\n[... N bytes truncated: kept K of T ...]\n".
constexpr uint64_t kMarkerBytes = 128;

void answer(const mcp::Message& request) {
  std::string line = request.method == "ping"
                         ? mcp::result_line(request.id, json::object())
                         : mcp::error_line(request.id, mcp::kMethodNotFound,
                                           "method not supported by this client: " + request.method);
  mcp::Message back = mcp::parse_message(line);
  fuzz::check(back.kind == mcp::Message::Kind::kResponse && back.id == request.id,
              "the client's answer to a request does not read as a response to its id");
}

void read_result(const json& result) {
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  std::string cursor;
  if (mcp::parse_tools_page("fuzz", result, &tools, &skipped, &cursor).ok()) {
    for (const auto& tool : tools) (void)mcp::tool_spec("fuzz", tool);
  }
  ToolResult r = mcp::call_result(result, kMaxOutputBytes);
  fuzz::check(r.output.size() <= kMaxOutputBytes + kMarkerBytes,
              "a tools/call result is longer than its bound");
  fuzz::check(r.output.size() <= kMaxOutputBytes || r.truncated,
              "a tools/call result is over its bound and not marked truncated");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mcp::Message m = mcp::parse_message(std::string_view(reinterpret_cast<const char*>(data), size));
  switch (m.kind) {
    case mcp::Message::Kind::kRequest:
      answer(m);
      break;
    case mcp::Message::Kind::kNotification:
      (void)m.params.dump();
      break;
    case mcp::Message::Kind::kResponse:
      if (!m.is_error) read_result(m.result);
      break;
    case mcp::Message::Kind::kInvalid:
      break;
  }
  return 0;
}
