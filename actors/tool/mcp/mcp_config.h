// McpServerConfig: one entry of the config file's "mcp_servers"
// (docs/mcp.md), as runtime/config.h reads it. A plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace carapace {

// One entry of the config file's "mcp_servers" (docs/mcp.md).
struct McpServerConfig {
  std::string name;
  std::string command;
  std::vector<std::string> args;
  // Variables the server gets besides the tool environment policy's. No
  // value: the runtime's own value of that variable, if it has one (what a
  // stored session keeps for a variable whose name looks secret).
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::string cwd;  // "": the session's workspace; relative: to the workspace
  uint64_t timeout_ms = 60000;
  // Bounds on what the server writes (docs/mcp.md): one stdout message; its
  // stderr logged per start (bytes, lines per second; the rest is counted).
  uint64_t max_message_bytes = 64ull << 20;
  uint64_t max_stderr_bytes = 4ull << 20;
  uint64_t stderr_lines_per_second = 100;
  friend bool operator==(const McpServerConfig&, const McpServerConfig&) = default;
};

}  // namespace carapace
