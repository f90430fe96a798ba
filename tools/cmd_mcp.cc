// carapace mcp list
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "actors/tool/mcp/mcp_server.h"
#include "actors/tool/workspace.h"
#include "runtime/config.h"
#include "tools/cli.h"
#include "tools/cli_run.h"

namespace carapace::cli {
namespace {

struct McpListArgs {
  std::string config;
  std::string workspace;
};

int run_mcp_list(Context& ctx, const McpListArgs& args) {
  Config config;
  if (int rc = load_cli_config(ctx, args.config, &config); rc != kExitOk) return rc;
  if (config.mcp_servers.empty()) {
    std::string summary = "no MCP servers are configured (mcp_servers in the config file, docs/mcp.md)";
    if (ctx.json) {
      print_redacted(
          ctx, {{"success", true}, {"data", {{"servers", nlohmann::json::array()}}}, {"summary", summary}});
    } else {
      std::cout << summary << "\n";
    }
    return kExitOk;
  }
  std::string workspace = !args.workspace.empty()     ? args.workspace
                          : !config.workspace.empty() ? config.workspace
                                                      : std::filesystem::current_path().string();
  std::string canonical;
  if (Status s = canonical_workspace(workspace, &canonical); !s.ok()) return ctx.fail(s);
  SandboxPlan plan;
  if (Status s = plan_sandbox(config.sandbox, sandbox_support(), &plan, nullptr); !s.ok()) return ctx.fail(s);
  // Failures are reported below, with the servers' stderr; not twice.
  spdlog::set_level(spdlog::level::off);

  ToolEnvOptions env = config.tool_env;
  env.secret_names = provider_key_env_names(config.provider);
  nlohmann::json servers = nlohmann::json::array();
  size_t failed = 0, tools_total = 0;
  for (const auto& server_config : config.mcp_servers) {
    McpServer server(McpServerOptions{.config = server_config,
                                      .workspace = canonical,
                                      .env_policy = env,
                                      .sandbox = config.sandbox,
                                      .max_output_bytes = config.shell.max_output_bytes});
    Status s = server.start();
    nlohmann::json entry = {{"name", server_config.name}, {"ok", s.ok()}};
    if (!s.ok()) {
      ++failed;
      entry["error"] = s.message();
      if (!ctx.json)
        std::printf("%s: failed to start: %s\n", ctx.shown(server_config.name).c_str(),
                    ctx.shown(s.message()).c_str());
    } else {
      std::vector<mcp::ToolInfo> tools = server.tools();
      tools_total += tools.size();
      entry["protocol_version"] = server.protocol_version();
      entry["skipped"] = server.skipped();
      nlohmann::json list = nlohmann::json::array();
      for (const auto& t : tools) {
        list.push_back({{"name", mcp::qualified_tool_name(server_config.name, t.name)},
                        {"server_name", t.name},
                        {"description", t.description},
                        {"read_only", t.read_only},
                        {"idempotent", t.idempotent},
                        {"input_schema", t.input_schema}});
      }
      entry["tools"] = list;
      if (!ctx.json) {
        std::printf("%s: %s (protocol %s)\n", ctx.shown(server_config.name).c_str(),
                    count(tools.size(), "tool").c_str(), ctx.shown(server.protocol_version()).c_str());
        for (const auto& t : tools) {
          std::string hints = t.read_only ? " [read-only]" : t.idempotent ? " [idempotent]" : "";
          std::string first_line = t.description.substr(0, t.description.find('\n'));
          if (first_line.size() > 100) first_line = first_line.substr(0, 97) + "...";
          std::printf("  %-40s%s %s\n",
                      ctx.shown(mcp::qualified_tool_name(server_config.name, t.name)).c_str(), hints.c_str(),
                      ctx.shown(first_line).c_str());
        }
        for (const auto& why : server.skipped()) std::printf("  skipped: %s\n", ctx.shown(why).c_str());
      }
    }
    server.stop();
    servers.push_back(std::move(entry));
  }
  std::string summary = count(config.mcp_servers.size(), "server") + ", " + count(tools_total, "tool") +
                        (failed ? "; " + std::to_string(failed) + " failed to start" : "");
  if (ctx.json) {
    print_redacted(ctx, {{"success", failed == 0}, {"data", {{"servers", servers}}}, {"summary", summary}});
  } else {
    std::cout << summary << "\n";
  }
  return failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace

void register_mcp_commands(CLI::App& app, Context& ctx) {
  auto* mcp = app.add_subcommand("mcp", "MCP servers: the tools they give the sessions (docs/mcp.md)");
  mcp->require_subcommand(1);
  auto args = std::make_shared<McpListArgs>();
  auto* list = mcp->add_subcommand(
      "list",
      "Start each configured MCP server, list its tools, and report servers that fail to start (exit 1)");
  list->add_option("--config", args->config,
                   "Config file (default: $CARAPACE_HOME/config.json if it exists)");
  list->add_option(
      "--workspace", args->workspace,
      "Directory the servers start in (default: the config's session.workspace, else the current one)");
  add_json_flag(list, ctx);
  list->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_mcp_list(ctx, *args); }; });
}

}  // namespace carapace::cli
