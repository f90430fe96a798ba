// McpClient: a connection to one MCP server over the stdio transport
// (actors/tool/mcp/mcp_jsonrpc.h): starts its program (actors/tool/mcp/mcp_process.h),
// performs the initialize handshake, lists its tools (every page), calls
// them, and stops it.
//
// One I/O thread per client owns the process: it starts it (the guard dies
// with that thread), writes queued messages to its stdin, reads its stdout
// line by line and its stderr, which goes to Carapace's log (spdlog, so
// redacted) and is kept (its last lines) for error messages. What of its
// stderr is logged is bounded per start: at most stderr_lines_per_second
// lines in any second and max_stderr_bytes in all (each line counted with
// its log framing); lines past either are counted, and the count is logged
// once the flood has paused for a second, or when the server ends. On stdout, a
// line that is not JSON-RPC is logged and ignored; an answer to an unknown
// id is logged and ignored; a `ping` is answered; any other request from
// the server gets JSON-RPC error -32601 at once; notifications/tools/
// list_changed sets a flag (tools_changed()). A message longer than
// max_message_bytes ends the connection as soon as that much of it has
// arrived (it is never held whole), with an error naming the limit. When the process exits, every
// request in flight is answered at once with an error saying so.
//
// A request that gets no answer in time is abandoned with an error (a
// tools/call is also cancelled: notifications/cancelled); the caller
// decides what to do with a server that hangs (kill()).
//
// Thread safety: every method may be called from any thread; requests from
// several threads run at once. The destructor stops the server.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/tool/mcp/mcp_process.h"
#include "actors/tool/mcp/mcp_result.h"
#include "base/status.h"

namespace carapace {

struct McpClientOptions {
  std::string name;  // the server's name, in messages and log lines
  McpProcessOptions process;
  std::chrono::milliseconds request_timeout{60000};  // initialize and tools/list
  uint64_t max_message_bytes = 64ull << 20;
  uint64_t max_stderr_bytes = 4ull << 20;  // logged per start
  uint64_t stderr_lines_per_second = 100;  // logged
  // After stdin is closed, how long the server has to exit before SIGTERM,
  // and after SIGTERM before SIGKILL.
  std::chrono::milliseconds stop_grace{1000};
  // Called on the I/O thread when notifications/tools/list_changed
  // arrives (after the flag is set); must return at once.
  std::function<void()> on_tools_changed;
};

class McpClient {
 public:
  struct Reply {
    enum class Kind { kResult, kError, kTimeout, kGone };
    Kind kind = Kind::kGone;
    nlohmann::json result;
    std::string error;  // what went wrong, for every kind but kResult
  };

  // Starts the server and performs the handshake: initialize (protocol
  // 2025-11-25; 2025-06-18 and 2025-03-26 accepted back), then
  // notifications/initialized. Errors name the server and say what went
  // wrong, with the last lines of its stderr; the process is stopped then.
  static Status start(McpClientOptions options, std::unique_ptr<McpClient>* out);
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  // Every page of tools/list. Tools that cannot be offered are left out,
  // each with its reason in *skipped.
  Status list_tools(std::vector<mcp::ToolInfo>* tools, std::vector<std::string>* skipped);

  // Sends a request and waits for its answer up to `timeout`.
  Reply request(const std::string& method, const nlohmann::json& params, std::chrono::milliseconds timeout);

  // True if notifications/tools/list_changed arrived since the last call;
  // clears the flag.
  bool take_tools_changed() { return tools_changed_.exchange(false); }

  bool alive() const;
  std::string protocol_version() const { return protocol_version_; }
  // The process's end ("exited with status 1") and its last stderr lines;
  // "" while it runs.
  std::string exit_description() const;
  std::string stderr_tail() const;
  pid_t pid() const { return pid_.load(); }

  // Stops the server: stdin closed, then SIGTERM, then SIGKILL, each after
  // stop_grace; returns when it and everything it started are gone and
  // reaped. kill() does the last step at once. Both are idempotent.
  void stop();
  void kill();

 private:
  explicit McpClient(McpClientOptions options);
  void run_io(std::promise<Status>* started);
  // Acts on one stdout line. Returns why the connection must end (a message
  // past a bound), or "".
  std::string handle_line(std::string_view line);
  void handle_stderr(std::string_view data, bool flush);
  void log_stderr_line(const std::string& line);
  // Logs how many stderr lines were dropped since the last report, if any.
  void report_dropped_stderr();
  // The config key of one of this server's bounds ("mcp_servers.NAME.KEY").
  std::string key(const char* name) const;
  void send(std::string line);
  void fail_pending(const std::string& why);
  void wake();
  void request_stop(bool graceful);

  McpClientOptions options_;
  std::thread io_;
  int wake_fd_ = -1;
  std::atomic<pid_t> pid_{0};
  std::atomic<bool> tools_changed_{false};
  std::string protocol_version_;

  mutable std::mutex mu_;
  bool gone_ = false;
  std::string gone_reason_;
  int stop_mode_ = 0;  // 0: running, 1: graceful stop asked, 2: kill asked
  std::deque<std::string> outgoing_;
  uint64_t next_id_ = 0;
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Reply reply;
  };
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::deque<std::string> stderr_lines_;
  std::string stderr_partial_;  // I/O thread only
  // What of stderr was logged and dropped (I/O thread only).
  struct StderrBudget {
    std::chrono::steady_clock::time_point window_start{};
    uint64_t window_lines = 0;
    uint64_t logged_bytes = 0;                      // toward max_stderr_bytes
    bool capped = false;                            // max_stderr_bytes reached: nothing more is logged
    uint64_t dropped_lines = 0, dropped_bytes = 0;  // not reported yet
    std::chrono::steady_clock::time_point last_drop{};
  };
  StderrBudget stderr_budget_;
};

}  // namespace carapace
