// McpHub: the configured MCP servers of a runtime and their tools in its
// ToolRegistry, as mcp__SERVER__TOOL (actors/tool/mcp/mcp_result.h).
//
// A server runs per workspace: ensure(workspace) starts each configured
// server for that workspace unless it runs (a session's start, resume or
// fork asks first, so its tools are registered before its prompt is
// built), and registers the tools it lists; a server that fails to start is
// logged and left out, and the sessions go on without its tools. A tool's
// function runs the call on the server of the calling session's workspace
// (starting it if needed). When a server's tool list changes, the
// registry follows: new tools are added, gone ones removed, changed ones
// replaced; the next prompt lists them.
//
// The tools are blocking ToolDefinitions: calls go through the tool actor
// like any tool (tool.requested/tool.completed, hooks, resume rules), and
// a tool the server marks readOnlyHint or idempotentHint is declared
// idempotent (an interrupted call is run again on resume).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/tool/mcp/mcp_server.h"
#include "actors/tool/tool_registry.h"

namespace carapace {

struct McpHubOptions {
  std::vector<McpServerConfig> servers;
  ToolEnvOptions env_policy;
  SandboxOptions sandbox;
  uint64_t max_output_bytes = 64 * 1024;
  std::chrono::milliseconds stop_grace{1000};
};

class McpHub : public std::enable_shared_from_this<McpHub> {
 public:
  static std::shared_ptr<McpHub> make(McpHubOptions options, std::shared_ptr<ToolRegistry> registry);
  ~McpHub();

  // Starts the servers of `workspace` not running yet (one after another)
  // and registers their tools. Returns the errors of those that failed.
  std::vector<Status> ensure(const std::string& workspace);

  ToolResult call(const std::string& server, const std::string& tool, const nlohmann::json& args,
                  const std::string& workspace);

  // Stops every server (stdin closed, SIGTERM, SIGKILL, in parallel);
  // calls in flight end with an error and later ones fail.
  void shutdown();

  // The server instance for (server, workspace), made if needed (not started).
  std::shared_ptr<McpServer> server(const std::string& name, const std::string& workspace);

 private:
  McpHub(McpHubOptions options, std::shared_ptr<ToolRegistry> registry);
  void publish(const std::string& server, const std::vector<mcp::ToolInfo>& tools);

  McpHubOptions options_;
  std::shared_ptr<ToolRegistry> registry_;
  std::mutex mu_;
  bool shut_ = false;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<McpServer>> servers_;
  std::mutex publish_mu_;
};

}  // namespace carapace
