#include "actors/tool/mcp/mcp_server.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <thread>

#include "actors/tool/mcp/mcp_client.h"
#include "actors/tool/workspace.h"

extern char** environ;

namespace carapace {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{10000};

}  // namespace

std::vector<std::string> mcp_server_environment(const McpServerConfig& config, const ToolEnvOptions& policy,
                                                const char* const* environment) {
  std::vector<std::string> env = tool_environment(policy, environment);
  for (const auto& [name, value] : config.env) {
    const std::string prefix = name + "=";
    std::erase_if(env, [&prefix](const std::string& e) { return e.starts_with(prefix); });
    if (value) {
      env.push_back(name + "=" + *value);
    } else if (const char* own = std::getenv(name.c_str()); own != nullptr) {
      env.push_back(name + "=" + own);
    }
  }
  return env;
}

McpServer::McpServer(McpServerOptions options) : options_(std::move(options)) {
  refresher_ = std::thread([this] { run_refresher(); });
}

McpServer::~McpServer() {
  stop();
  if (refresher_.joinable()) refresher_.join();
}

void McpServer::run_refresher() {
  std::unique_lock lock(mu_);
  for (;;) {
    refresh_cv_.wait(lock, [&] { return refresh_wanted_ || stopped_; });
    if (stopped_) return;
    refresh_wanted_ = false;
    std::shared_ptr<McpClient> client = client_;
    lock.unlock();
    if (client) refresh_if_changed(*client);
    lock.lock();
  }
}

void McpServer::refresh_if_changed(McpClient& client) {
  std::lock_guard refresh(refresh_mu_);
  if (!client.alive() || !client.take_tools_changed()) return;
  if (Status listed = list_and_publish(client); !listed.ok()) {
    lib_log().error("{}: the tool list changed but could not be read again: {}", label(), listed.message());
  }
}

std::string McpServer::label() const { return "MCP server " + options_.config.name; }

uint64_t McpServer::starts() const {
  std::lock_guard lock(mu_);
  return starts_;
}

bool McpServer::running() const {
  std::lock_guard lock(mu_);
  return client_ && client_->alive();
}

std::vector<mcp::ToolInfo> McpServer::tools() const {
  std::lock_guard lock(mu_);
  return tools_;
}

std::vector<std::string> McpServer::skipped() const {
  std::lock_guard lock(mu_);
  return skipped_;
}

std::string McpServer::protocol_version() const {
  std::lock_guard lock(mu_);
  return client_ ? client_->protocol_version() : "";
}

void McpServer::stop() {
  std::shared_ptr<McpClient> client;
  std::shared_ptr<CallSandbox> sandbox;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    client = std::move(client_);
    sandbox = std::move(sandbox_);
  }
  refresh_cv_.notify_all();
  if (client) client->stop();
}

Status McpServer::start() {
  std::shared_ptr<McpClient> client;
  return ensure_client(std::chrono::milliseconds(0), &client);
}

Status McpServer::list_and_publish(McpClient& client) {
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  CARAPACE_RETURN_IF_ERROR(client.list_tools(&tools, &skipped));
  for (const std::string& why : skipped) lib_log().error("{}: a tool is not offered: {}", label(), why);
  {
    std::lock_guard lock(mu_);
    tools_ = tools;
    skipped_ = skipped;
  }
  if (options_.on_tools) options_.on_tools(tools);
  return Status();
}

Status McpServer::ensure_client(std::chrono::milliseconds wait, std::shared_ptr<McpClient>* out) {
  std::lock_guard start_lock(start_mu_);
  Clock::time_point not_before;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return Status::aborted(label() + " is stopped: the runtime is shutting down");
    if (client_ && client_->alive()) {
      *out = client_;
      return Status();
    }
    not_before = next_start_;
  }
  Clock::time_point now = Clock::now();
  if (now < not_before) {
    if (not_before - now > wait) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(not_before - now).count();
      return Status::busy(label() + " failed recently and is started again in " + std::to_string(ms) + " ms");
    }
    std::this_thread::sleep_until(not_before);
  }
  std::shared_ptr<McpClient> old;
  std::shared_ptr<CallSandbox> old_sandbox;
  {
    std::lock_guard lock(mu_);
    old = std::move(client_);
    old_sandbox = std::move(sandbox_);
  }
  if (old) old->stop();  // reaps what is left of the old one
  old.reset();
  old_sandbox.reset();

  const McpServerConfig& config = options_.config;
  auto failed = [&](Status s) {
    std::lock_guard lock(mu_);
    backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
    next_start_ = Clock::now() + backoff_;
    lib_log().error("{}", s.message());
    return s;
  };
  McpClientOptions o;
  o.name = config.name;
  o.request_timeout = std::chrono::milliseconds(config.timeout_ms);
  o.max_message_bytes = config.max_message_bytes;
  o.max_stderr_bytes = config.max_stderr_bytes;
  o.stderr_lines_per_second = config.stderr_lines_per_second;
  o.stop_grace = options_.stop_grace;
  o.on_tools_changed = [this] {
    {
      std::lock_guard lock(mu_);
      refresh_wanted_ = true;
    }
    refresh_cv_.notify_all();
  };
  o.process.argv.push_back(config.command);
  for (const auto& a : config.args) o.process.argv.push_back(a);
  o.process.cwd = config.cwd.empty()          ? options_.workspace
                  : config.cwd.front() == '/' ? config.cwd
                                              : options_.workspace + "/" + config.cwd;
  o.process.env = mcp_server_environment(config, options_.env_policy, environ);

  std::shared_ptr<CallSandbox> sandbox;
  SandboxPlan plan;
  Status planned = plan_sandbox(options_.sandbox, sandbox_support(), &plan, nullptr);
  if (!planned.ok()) return failed(planned.with_context(label() + ": its sandbox"));
  if (plan.mode != "off" || plan.network_off) {
    WorkspaceRoot root;
    Status s = WorkspaceRoot::open(options_.workspace, &root);
    std::unique_ptr<CallSandbox> made;
    if (s.ok()) s = CallSandbox::create(plan, options_.sandbox, root, &made);
    if (!s.ok()) return failed(s.with_context(label() + ": its sandbox could not be prepared"));
    sandbox = std::move(made);
    std::erase_if(o.process.env, [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; });
    o.process.env.push_back("TMPDIR=" + sandbox->scratch_dir());
    o.process.confinement = sandbox->confinement();
  }
  std::unique_ptr<McpClient> started;
  Status s = McpClient::start(std::move(o), &started);
  if (!s.ok()) return failed(s);
  std::shared_ptr<McpClient> client = std::move(started);
  s = list_and_publish(*client);
  if (!s.ok()) {
    client->stop();
    return failed(s);
  }
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      client->stop();
      return Status::aborted(label() + " is stopped: the runtime is shutting down");
    }
    client_ = client;
    sandbox_ = std::move(sandbox);
    if (starts_ > 0) lib_log().warn("{} restarted (start {})", label(), starts_ + 1);
    ++starts_;
    // A change announced while the first list was read is acted on now.
    refresh_wanted_ = true;
  }
  refresh_cv_.notify_all();
  lib_log().info("{} started in {} (protocol {})", label(), options_.workspace, client->protocol_version());
  *out = std::move(client);
  return Status();
}

ToolResult McpServer::call(const std::string& tool, const json& args) {
  const auto timeout = std::chrono::milliseconds(options_.config.timeout_ms);
  std::shared_ptr<McpClient> client;
  Status s = ensure_client(timeout / 2, &client);
  if (!s.ok()) return ToolResult::error("the tool was not run: " + s.message());
  McpClient::Reply reply = client->request("tools/call", {{"name", tool}, {"arguments", args}}, timeout);
  ToolResult result;
  switch (reply.kind) {
    case McpClient::Reply::Kind::kResult:
      result = mcp::call_result(reply.result, options_.max_output_bytes);
      {
        std::lock_guard lock(mu_);
        backoff_ = std::chrono::milliseconds(0);
      }
      break;
    case McpClient::Reply::Kind::kError:
      result = ToolResult::error(label() + " refused the call: " + reply.error);
      break;
    case McpClient::Reply::Kind::kTimeout:
      client->kill();
      result =
          ToolResult::error(label() + " gave no answer within " + std::to_string(timeout.count()) +
                            " ms: the call was cancelled and the server stopped with everything it "
                            "started (it is started again for the next call); what the call did is unknown");
      result.timed_out = true;
      break;
    case McpClient::Reply::Kind::kGone: {
      std::string tail = client->stderr_tail();
      {
        std::lock_guard lock(mu_);
        backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
        next_start_ = Clock::now() + backoff_;
      }
      result =
          ToolResult::error(label() + ": " + reply.error +
                            " during the call; it is started again for the next call, and what this call "
                            "did is unknown" +
                            (tail.empty() ? "" : "\n[its stderr ends with]\n" + tail));
      break;
    }
  }
  refresh_if_changed(*client);
  return result;
}

}  // namespace carapace
