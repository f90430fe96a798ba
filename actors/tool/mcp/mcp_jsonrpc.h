// MCP JSON-RPC: the messages of the Model Context Protocol's stdio transport
// (revision 2025-11-25), as single lines of JSON-RPC 2.0: what the client
// writes (requests, notifications, answers to the server's requests) and how
// a line the server wrote is read.
//
// A line is one JSON object with no embedded newline, ended by '\n'. Reading
// never throws: a line that is not a JSON-RPC 2.0 message comes back as
// kInvalid with the reason, so a server that prints garbage on stdout is
// reported and ignored.
//
// Thread safety: pure functions on values.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace carapace::mcp {

// The revision the client asks for, and the older ones it accepts when a
// server answers with one of them.
inline constexpr std::string_view kProtocolVersion = "2025-11-25";
bool supported_protocol_version(std::string_view version);

// JSON-RPC error codes used here.
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidRequest = -32600;

std::string request_line(uint64_t id, std::string_view method, const nlohmann::json& params);
std::string notification_line(std::string_view method, const nlohmann::json& params);
std::string result_line(const nlohmann::json& id, const nlohmann::json& result);
std::string error_line(const nlohmann::json& id, int code, std::string_view message);

struct Message {
  enum class Kind { kRequest, kNotification, kResponse, kInvalid };
  Kind kind = Kind::kInvalid;
  nlohmann::json id;   // requests and responses
  std::string method;  // requests and notifications
  nlohmann::json params;
  nlohmann::json result;  // a response without error
  bool is_error = false;  // a response with "error"
  int error_code = 0;
  std::string error_message;
  std::string problem;  // kInvalid: why
  // kInvalid because it nests past the JSON depth bound: a server that sends
  // one is not spoken with further (its answer cannot be read, and a request
  // waiting for it would wait out its timeout).
  bool too_deep = false;
};

Message parse_message(std::string_view line);

// The params of the client's initialize request.
nlohmann::json initialize_params(std::string_view client_version);

}  // namespace carapace::mcp
