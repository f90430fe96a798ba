// MCP results: what a server's tools/list and tools/call answers mean to
// Carapace. A tools/list page becomes tool declarations (a tool with an
// unusable name or input schema is skipped, with the reason); a tools/call
// result becomes the text the model reads.
//
// Result text: each content block in order, separated by newlines — a text
// block verbatim, an image, audio or resource block as a one-line
// description ("[image: image/png, 12,345 bytes of base64]"), a resource
// link as its name and URI — then, if present, structuredContent as JSON
// after a "[structured content]" line. isError makes the result an error the
// model sees. Text over max_output_bytes keeps its head and tail with the
// shell tool's truncation marker (actors/tool/process/process.h, truncate_output).
//
// Names: the model sees mcp__SERVER__TOOL. A server name is 1 to 24
// letters, digits, '_' or '-' without "__"; the whole name must be a valid
// tool name (1 to 64 characters of [A-Za-z0-9_-]).
//
// Thread safety: pure functions on values.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/tool/tool.h"
#include "base/status.h"

namespace carapace::mcp {

struct ToolInfo {
  std::string name;  // the server's own name for it
  std::string description;
  nlohmann::json input_schema;  // a JSON object with "type": "object"
  bool read_only = false;       // annotations.readOnlyHint
  bool idempotent = false;      // annotations.idempotentHint
};

// OK, or invalid_argument naming what is wrong with the server name.
Status validate_server_name(const std::string& name);

// "mcp__" + server + "__" + tool.
std::string qualified_tool_name(const std::string& server, const std::string& tool);

// One entry of tools/list's "tools": OK with *out filled, or
// invalid_argument saying why the tool cannot be offered (its name, its
// inputSchema), for `server`.
Status parse_tool(const std::string& server, const nlohmann::json& entry, ToolInfo* out);

// One tools/list result: the usable tools appended to *tools, a reason for
// each skipped one appended to *skipped, the next cursor ("" when none).
// invalid_argument if the result is not an object with a "tools" array.
Status parse_tools_page(const std::string& server, const nlohmann::json& result, std::vector<ToolInfo>* tools,
                        std::vector<std::string>* skipped, std::string* next_cursor);

// A ToolSpec for the model: the qualified name, the server's description
// and schema; idempotent when the server marks the tool read-only or
// idempotent (so an interrupted call is run again on resume).
ToolSpec tool_spec(const std::string& server, const ToolInfo& tool);

// The text and error flag of a tools/call result.
ToolResult call_result(const nlohmann::json& result, uint64_t max_output_bytes);

}  // namespace carapace::mcp
