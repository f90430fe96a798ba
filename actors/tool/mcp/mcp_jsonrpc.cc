#include "actors/tool/mcp/mcp_jsonrpc.h"

#include "base/bounded_json.h"

namespace carapace::mcp {
namespace {

using nlohmann::json;

// One line: compact, invalid UTF-8 replaced rather than thrown on.
std::string line_of(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

bool supported_protocol_version(std::string_view version) {
  return version == kProtocolVersion || version == "2025-06-18" || version == "2025-03-26";
}

std::string request_line(uint64_t id, std::string_view method, const json& params) {
  json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) m["params"] = params;
  return line_of(m);
}

std::string notification_line(std::string_view method, const json& params) {
  json m = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) m["params"] = params;
  return line_of(m);
}

std::string result_line(const json& id, const json& result) {
  return line_of({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string error_line(const json& id, int code, std::string_view message) {
  return line_of({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

Message parse_message(std::string_view line) {
  Message m;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  if (json_depth_exceeds(line)) {
    m.problem = "JSON nested deeper than " + std::to_string(limits::kJsonDepth) +
                " levels (the limit on JSON depth, docs/config.md)";
    m.too_deep = true;
    return m;
  }
  json doc = json::parse(line, nullptr, false);
  if (doc.is_discarded()) {
    m.problem = "not JSON";
    return m;
  }
  if (!doc.is_object()) {
    m.problem = "not a JSON object";
    return m;
  }
  auto version = doc.find("jsonrpc");
  if (version == doc.end() || *version != "2.0") {
    m.problem = "not JSON-RPC 2.0 (\"jsonrpc\" is not \"2.0\")";
    return m;
  }
  auto id = doc.find("id");
  bool has_id = id != doc.end() && (id->is_string() || id->is_number_integer());
  if (id != doc.end() && !has_id && !id->is_null()) {
    m.problem = "its \"id\" is neither a string nor an integer";
    return m;
  }
  auto method = doc.find("method");
  if (method != doc.end()) {
    if (!method->is_string()) {
      m.problem = "its \"method\" is not a string";
      return m;
    }
    m.method = method->get<std::string>();
    if (auto p = doc.find("params"); p != doc.end()) m.params = *p;
    if (has_id) {
      m.kind = Message::Kind::kRequest;
      m.id = *id;
    } else {
      m.kind = Message::Kind::kNotification;
    }
    return m;
  }
  if (!has_id) {
    // An error about a request that could not be read has a null id; there
    // is nothing to match it to.
    m.problem = doc.contains("error") ? "an error without an id: " + doc["error"].dump()
                                      : "neither a request nor a response";
    return m;
  }
  m.id = *id;
  if (auto error = doc.find("error"); error != doc.end()) {
    m.kind = Message::Kind::kResponse;
    m.is_error = true;
    if (error->is_object()) {
      auto code = error->find("code");
      if (code != error->end() && code->is_number_integer()) m.error_code = code->get<int>();
      auto message = error->find("message");
      m.error_message =
          message != error->end() && message->is_string() ? message->get<std::string>() : error->dump();
    } else {
      m.error_message = error->dump();
    }
    return m;
  }
  auto result = doc.find("result");
  if (result == doc.end()) {
    m.problem = "a response with neither \"result\" nor \"error\"";
    return m;
  }
  m.kind = Message::Kind::kResponse;
  m.result = std::move(*result);
  return m;
}

json initialize_params(std::string_view client_version) {
  return {{"protocolVersion", kProtocolVersion},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "carapace"}, {"version", client_version}}}};
}

}  // namespace carapace::mcp
