#include "actors/tool/mcp/mcp_result.h"

#include <algorithm>

#include "actors/tool/process/process.h"

namespace carapace::mcp {
namespace {

using nlohmann::json;

bool tool_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

std::string with_thousands(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string string_field(const json& block, const char* key) {
  auto it = block.find(key);
  return it != block.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string describe_binary(const std::string& kind, const json& block, const char* data_key) {
  std::string mime = string_field(block, "mimeType");
  std::string data = string_field(block, data_key);
  return "[" + kind + ": " + (mime.empty() ? "unknown type" : mime) + ", " + with_thousands(data.size()) +
         " bytes of base64]";
}

std::string block_text(const json& block) {
  if (!block.is_object()) return "[content block that is not an object]";
  std::string type = string_field(block, "type");
  if (type == "text") return string_field(block, "text");
  if (type == "image") return describe_binary("image", block, "data");
  if (type == "audio") return describe_binary("audio", block, "data");
  if (type == "resource_link") {
    std::string name = string_field(block, "name");
    return "[resource link: " + (name.empty() ? "" : name + " ") + string_field(block, "uri") + "]";
  }
  if (type == "resource") {
    auto r = block.find("resource");
    if (r == block.end() || !r->is_object()) return "[resource]";
    std::string uri = string_field(*r, "uri");
    std::string mime = string_field(*r, "mimeType");
    if (r->contains("text")) {
      // Embedded text is what the model asked for: keep it.
      return "[resource: " + uri + (mime.empty() ? "" : ", " + mime) + "]\n" + string_field(*r, "text");
    }
    return "[resource: " + uri + (mime.empty() ? "" : ", " + mime) + ", " +
           with_thousands(string_field(*r, "blob").size()) + " bytes of base64]";
  }
  return "[content block of type \"" + type + "\"]";
}

}  // namespace

Status validate_server_name(const std::string& name) {
  if (name.empty() || name.size() > 24 || !std::all_of(name.begin(), name.end(), tool_name_char)) {
    return Status::invalid_argument("server name \"" + name +
                                    "\" must be 1 to 24 letters, digits, '_' or '-' (it is part of the tool "
                                    "names the model sees)");
  }
  if (name.find("__") != std::string::npos) {
    return Status::invalid_argument("server name \"" + name +
                                    "\" must not contain \"__\" (it separates the "
                                    "server from the tool in mcp__SERVER__TOOL)");
  }
  return Status();
}

std::string qualified_tool_name(const std::string& server, const std::string& tool) {
  return "mcp__" + server + "__" + tool;
}

Status parse_tool(const std::string& server, const json& entry, ToolInfo* out) {
  if (!entry.is_object()) return Status::invalid_argument("a tools/list entry is not an object");
  auto name = entry.find("name");
  if (name == entry.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return Status::invalid_argument("a tool has no name: " + entry.dump().substr(0, 200));
  }
  ToolInfo t;
  t.name = name->get<std::string>();
  std::string shown = "tool \"" + t.name.substr(0, 100) + "\"";
  if (!std::all_of(t.name.begin(), t.name.end(), tool_name_char)) {
    return Status::invalid_argument(shown +
                                    ": its name has characters other than letters, digits, '_' and '-'");
  }
  std::string qualified = qualified_tool_name(server, t.name);
  if (qualified.size() > 64) {
    return Status::invalid_argument(shown + ": " + qualified + " is longer than 64 characters");
  }
  auto schema = entry.find("inputSchema");
  if (schema == entry.end() || !schema->is_object()) {
    return Status::invalid_argument(shown + ": its inputSchema is missing or not a JSON object");
  }
  auto type = schema->find("type");
  if (type == schema->end() || *type != "object") {
    return Status::invalid_argument(shown + ": its inputSchema's \"type\" must be \"object\", got " +
                                    (type == schema->end() ? std::string("none") : type->dump()));
  }
  if (auto props = schema->find("properties"); props != schema->end() && !props->is_object()) {
    return Status::invalid_argument(shown + ": its inputSchema's \"properties\" is not an object");
  }
  if (auto req = schema->find("required"); req != schema->end()) {
    if (!req->is_array() ||
        !std::all_of(req->begin(), req->end(), [](const json& r) { return r.is_string(); })) {
      return Status::invalid_argument(shown + ": its inputSchema's \"required\" is not an array of strings");
    }
  }
  t.input_schema = *schema;
  t.description = string_field(entry, "description");
  if (t.description.empty()) t.description = string_field(entry, "title");
  if (auto a = entry.find("annotations"); a != entry.end() && a->is_object()) {
    t.read_only = a->value("readOnlyHint", json(false)) == json(true);
    t.idempotent = a->value("idempotentHint", json(false)) == json(true);
  }
  *out = std::move(t);
  return Status();
}

Status parse_tools_page(const std::string& server, const json& result, std::vector<ToolInfo>* tools,
                        std::vector<std::string>* skipped, std::string* next_cursor) {
  next_cursor->clear();
  if (!result.is_object()) return Status::invalid_argument("the tools/list result is not an object");
  auto list = result.find("tools");
  if (list == result.end() || !list->is_array()) {
    return Status::invalid_argument("the tools/list result has no \"tools\" array");
  }
  for (const json& entry : *list) {
    ToolInfo t;
    Status s = parse_tool(server, entry, &t);
    if (!s.ok()) {
      skipped->push_back(s.message());
      continue;
    }
    bool duplicate =
        std::any_of(tools->begin(), tools->end(), [&](const ToolInfo& o) { return o.name == t.name; });
    if (duplicate) {
      skipped->push_back("tool \"" + t.name + "\" is listed twice; the first is kept");
      continue;
    }
    tools->push_back(std::move(t));
  }
  if (auto c = result.find("nextCursor"); c != result.end() && c->is_string())
    *next_cursor = c->get<std::string>();
  return Status();
}

ToolSpec tool_spec(const std::string& server, const ToolInfo& tool) {
  return ToolSpec{.name = qualified_tool_name(server, tool.name),
                  .description = tool.description,
                  .schema = JsonText{tool.input_schema.dump(-1, ' ', false, json::error_handler_t::replace)},
                  .idempotent = tool.read_only || tool.idempotent};
}

ToolResult call_result(const json& result, uint64_t max_output_bytes) {
  ToolResult out;
  if (!result.is_object()) {
    out.output = "the MCP server's tools/call result is not an object: " + result.dump().substr(0, 200);
    out.is_error = true;
    return out;
  }
  std::string text;
  auto content = result.find("content");
  if (content != result.end() && content->is_array()) {
    for (const json& block : *content) {
      if (!text.empty()) text += '\n';
      text += block_text(block);
    }
  }
  if (auto structured = result.find("structuredContent");
      structured != result.end() && !structured->is_null()) {
    if (!text.empty()) text += '\n';
    text += "[structured content]\n" + structured->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  out.is_error = result.value("isError", json(false)) == json(true);
  uint64_t total = text.size();
  out.output = truncate_output(text, max_output_bytes, &out.truncated);
  out.original_bytes = out.truncated ? total : 0;
  return out;
}

}  // namespace carapace::mcp
