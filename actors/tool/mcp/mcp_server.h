// McpServer: one configured MCP server for one workspace, supervised. It
// starts the server (actors/tool/mcp/mcp_client.h) in the workspace (or its
// configured cwd), with the tool environment policy's variables plus the
// ones it configures, under the shell's sandbox (actors/tool/process/sandbox.h),
// lists its tools, and runs calls on it.
//
// Supervision: a server that exits or crashes answers the call in flight
// with a tool error and is started again for the next call, after a
// backoff that doubles from 100 ms to 10 s while starts keep failing or
// calls keep ending in a crash (a call that succeeds resets it). A call
// that gets no answer within timeout_ms is cancelled
// (notifications/cancelled), its server killed with everything it started,
// and the call reported as timed out. After a call, a
// notifications/tools/list_changed that arrived is acted on: the tool list
// is fetched again and handed to on_tools, before the call returns; one
// that arrives between calls is acted on at once by a thread of the
// server's own.
//
// Thread safety: every method may be called from any thread; calls from
// several threads run at once on one server.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actors/tool/mcp/mcp_config.h"
#include "actors/tool/mcp/mcp_result.h"
#include "actors/tool/process/sandbox.h"
#include "actors/tool/tool.h"
#include "actors/tool/process/tool_env.h"
#include "base/status.h"

namespace carapace {

class McpClient;
class CallSandbox;

struct McpServerOptions {
  McpServerConfig config;
  std::string workspace;  // canonical
  ToolEnvOptions env_policy;
  SandboxOptions sandbox;
  uint64_t max_output_bytes = 64 * 1024;  // the shell's cap
  std::chrono::milliseconds stop_grace{1000};
  // Hears each tool list the server gives (at start, after a restart, after
  // list_changed), with the tools it skipped and why.
  std::function<void(const std::vector<mcp::ToolInfo>& tools)> on_tools;
};

class McpServer {
 public:
  explicit McpServer(McpServerOptions options);
  ~McpServer();  // stop()
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Starts the server unless it runs, and lists its tools. Errors name the
  // server and say why, with its stderr.
  Status start();
  ToolResult call(const std::string& tool, const nlohmann::json& args);
  std::vector<mcp::ToolInfo> tools() const;
  // Why each tool of the last list was left out (a bad name or schema).
  std::vector<std::string> skipped() const;
  // The protocol revision the running server speaks ("" when none runs).
  std::string protocol_version() const;
  // Stops the server (stdin closed, SIGTERM, SIGKILL); later calls fail.
  void stop();
  uint64_t starts() const;
  bool running() const;

 private:
  // Starts a client if none is alive, respecting the backoff when `wait`
  // allows it; the live client, or an error.
  Status ensure_client(std::chrono::milliseconds wait, std::shared_ptr<McpClient>* out);
  Status list_and_publish(McpClient& client);
  // Reads the tool list again if the server said it changed.
  void refresh_if_changed(McpClient& client);
  void run_refresher();
  std::string label() const;

  McpServerOptions options_;
  mutable std::mutex mu_;
  std::mutex start_mu_;  // one start at a time
  std::shared_ptr<McpClient> client_;
  std::shared_ptr<CallSandbox> sandbox_;  // the running server's; goes after it
  std::vector<mcp::ToolInfo> tools_;
  std::vector<std::string> skipped_;
  bool stopped_ = false;
  uint64_t starts_ = 0;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point next_start_{};
  // A list_changed between calls is acted on by a thread of the server's own.
  std::mutex refresh_mu_;  // one refresh at a time; a call waits for one under way
  std::condition_variable refresh_cv_;
  bool refresh_wanted_ = false;  // under mu_
  std::thread refresher_;
};

// The environment of a server: `policy` applied to `environment` (a
// null-terminated array such as environ), then the configured variables.
std::vector<std::string> mcp_server_environment(const McpServerConfig& config, const ToolEnvOptions& policy,
                                                const char* const* environment);

}  // namespace carapace
