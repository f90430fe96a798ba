#include "actors/tool/mcp/mcp_hub.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include <thread>

namespace carapace {

std::shared_ptr<McpHub> McpHub::make(McpHubOptions options, std::shared_ptr<ToolRegistry> registry) {
  return std::shared_ptr<McpHub>(new McpHub(std::move(options), std::move(registry)));
}

McpHub::McpHub(McpHubOptions options, std::shared_ptr<ToolRegistry> registry)
    : options_(std::move(options)), registry_(std::move(registry)) {}

McpHub::~McpHub() { shutdown(); }

std::shared_ptr<McpServer> McpHub::server(const std::string& name, const std::string& workspace) {
  std::lock_guard lock(mu_);
  if (shut_) return nullptr;
  auto key = std::make_pair(name, workspace);
  auto it = servers_.find(key);
  if (it != servers_.end()) return it->second;
  const McpServerConfig* config = nullptr;
  for (const auto& c : options_.servers) {
    if (c.name == name) config = &c;
  }
  if (config == nullptr) return nullptr;
  std::weak_ptr<McpHub> self = weak_from_this();
  auto server = std::make_shared<McpServer>(
      McpServerOptions{.config = *config,
                       .workspace = workspace,
                       .env_policy = options_.env_policy,
                       .sandbox = options_.sandbox,
                       .max_output_bytes = options_.max_output_bytes,
                       .stop_grace = options_.stop_grace,
                       .on_tools = [self, name](const std::vector<mcp::ToolInfo>& tools) {
                         if (auto hub = self.lock()) hub->publish(name, tools);
                       }});
  servers_.emplace(key, server);
  return server;
}

std::vector<Status> McpHub::ensure(const std::string& workspace) {
  std::vector<Status> failures;
  for (const auto& c : options_.servers) {
    auto s = server(c.name, workspace);
    if (!s || s->running()) continue;
    Status started = s->start();
    if (!started.ok()) failures.push_back(started);
  }
  return failures;
}

ToolResult McpHub::call(const std::string& server_name, const std::string& tool, const nlohmann::json& args,
                        const std::string& workspace) {
  auto s = server(server_name, workspace);
  if (!s) return ToolResult::error("MCP server " + server_name + " is stopped: the runtime is shutting down");
  return s->call(tool, args);
}

void McpHub::shutdown() {
  std::vector<std::shared_ptr<McpServer>> all;
  {
    std::lock_guard lock(mu_);
    shut_ = true;
    for (auto& [key, s] : servers_) all.push_back(s);
  }
  std::vector<std::thread> stoppers;
  for (auto& s : all) stoppers.emplace_back([s] { s->stop(); });
  for (auto& t : stoppers) t.join();
}

void McpHub::publish(const std::string& server_name, const std::vector<mcp::ToolInfo>& tools) {
  std::lock_guard lock(publish_mu_);
  const std::string prefix = mcp::qualified_tool_name(server_name, "");
  std::vector<ToolSpec> specs;
  for (const auto& t : tools) specs.push_back(mcp::tool_spec(server_name, t));
  for (const std::string& name : registry_->names()) {
    if (name.rfind(prefix, 0) != 0) continue;
    bool kept = std::any_of(specs.begin(), specs.end(), [&](const ToolSpec& s) { return s.name == name; });
    if (!kept) {
      registry_->remove(name);
      lib_log().info("MCP server {}: tool {} is gone", server_name, name);
    }
  }
  std::weak_ptr<McpHub> self = weak_from_this();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto existing = registry_->find(specs[i].name);
    if (existing && existing->spec == specs[i]) continue;
    if (existing) registry_->remove(specs[i].name);
    ToolDefinition def;
    def.spec = specs[i];
    def.blocking = true;
    def.run = [self, server_name, tool = tools[i].name](const nlohmann::json& args,
                                                        const ToolContext& context) {
      auto hub = self.lock();
      if (!hub)
        return ToolResult::error("MCP server " + server_name + " is gone: the runtime is shutting down");
      return hub->call(server_name, tool, args, context.workspace);
    };
    Status added = registry_->add(std::move(def));
    if (!added.ok())
      lib_log().error("MCP server {}: tool {} not registered: {}", server_name, specs[i].name, added.message());
  }
}

}  // namespace carapace
